"""The doc worker: `dramatiq workers.doc` (`make run-worker-doc`)."""

from shared.bootstrap import boot_worker

broker = boot_worker("doc")

from . import actors  # noqa: E402,F401  (binds the handlers to the broker above)
