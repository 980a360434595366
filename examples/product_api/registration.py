"""The example product API's registration (entry point `jobfleet.domains`: `product_api`).

Not a fleet process (compose, Kubernetes and `fleet status` do not know it): `make run` starts it
after the fleet on PRODUCT_API_PORT (default 8180) when its dependencies are installed.
"""

from shared.domains import Domain, Process

DOMAIN = Domain(
    name="product_api",
    order=200,
    processes=(
        Process(
            "product-api",
            "examples.product_api",
            kind="extra",
            port_env="PRODUCT_API_PORT",
            port=8180,
            requires=("uvicorn", "fastapi", "multipart", "jinja2"),
            summary="example product API: {url}/docs (X-API-Key header; development keys in docs/producers.md)",
        ),
    ),
    demo=("examples.product_api.demo:scenario",),
)
