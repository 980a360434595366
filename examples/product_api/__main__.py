"""`python -m examples.product_api`: the example API under uvicorn (PRODUCT_API_HOST/PORT)."""

from __future__ import annotations

import uvicorn

from .settings import ProductSettings


def main() -> None:
    settings = ProductSettings()
    uvicorn.run(
        "examples.product_api.app:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        log_level="info",
    )


if __name__ == "__main__":
    main()
