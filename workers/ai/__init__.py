"""The ai worker: `dramatiq workers.ai` (`make run-worker-ai`)."""

from shared.bootstrap import boot_worker
from shared.config import get_settings

from .logs import install as _redact_dramatiq_messages

broker = boot_worker("ai")
_redact_dramatiq_messages(log_content=get_settings().ai_log_content)

from . import actors  # noqa: E402,F401  (binds the handlers to the broker above)
