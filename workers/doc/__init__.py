"""The doc domain: PDF ingestion, page text (text layer or OCR), extraction and search.

`app.py` is the worker process (`dramatiq workers.doc.app`, `make run-worker-doc`), the only
module that boots anything; importing this package or `workers.doc.client` (the producer API)
boots nothing (DESIGN §1). `registration.py` declares the domain to the kernel.
"""
