"""The export domain: exports streamed from Postgres as CSV, XLSX, PDF or ZIP into object
storage, and their download links.

`app.py` is the worker process (`dramatiq workers.export.app`, `make run-worker-export`), the
only module that boots anything; importing this package or `workers.export.client` (the producer
API) boots nothing (DESIGN §1). `registration.py` declares the domain to the kernel.
"""
