"""The ai domain: summarize, extract, classify and embed through a provider port, with per-org
limits and cost accounting.

`app.py` is the worker process (`dramatiq workers.ai.app`, `make run-worker-ai`), the only
module that boots anything; importing this package or `workers.ai.client` (the producer API)
boots nothing (DESIGN §1). `registration.py` declares the domain to the kernel.
"""
