"""The ai worker: `dramatiq workers.ai` (`make run-worker-ai`)."""

from shared.bootstrap import boot_worker

broker = boot_worker("ai")

from . import actors  # noqa: E402,F401  (binds the handlers to the broker above)
