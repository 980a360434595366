"""The ai worker: `dramatiq workers.ai` (`make run-worker-ai`)."""

from shared.bootstrap import boot_worker
from shared.config import get_settings
from shared.observability.logging import redact_dramatiq_messages

broker = boot_worker("ai")
# The kernel keeps payloads out of Dramatiq's lines; AI_LOG_CONTENT (debugging) lets them in.
redact_dramatiq_messages(enabled=not get_settings().ai_log_content)

from . import actors  # noqa: E402,F401  (binds the handlers to the broker above)
