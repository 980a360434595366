"""The email domain: templated emails over SMTP, sequences, and the feedback loop.

`app.py` is the worker process (`dramatiq workers.email.app`, `make run-worker-email`), the only
module that boots anything; importing this package or `workers.email.client` (the producer API)
boots nothing (DESIGN §1). `registration.py` declares the domain to the kernel.
"""
