"""The email worker: `dramatiq workers.email` (`make run-worker-email`)."""

from shared.bootstrap import boot_worker

broker = boot_worker("email")

from . import actors  # noqa: E402,F401  (binds the handlers to the broker above)
