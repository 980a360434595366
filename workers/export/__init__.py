"""The export worker: `dramatiq workers.export` (`make run-worker-export`)."""

from shared.bootstrap import boot_worker

broker = boot_worker("export")

from . import actors  # noqa: E402,F401  (binds the handlers to the broker above)
