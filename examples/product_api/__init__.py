"""An example product API on top of the fleet (FastAPI, run by uvicorn):

    uvicorn examples.product_api.app:create_app --factory --port 8180
    python -m examples.product_api            # the same, host/port from PRODUCT_API_HOST/PORT

Needs the `api` and `email` extras. See docs/producers.md.
"""
