"""The ai worker process: `dramatiq workers.ai.app`.

The only module of the domain that boots anything: the worker's broker (installed globally, with
its runtime and logging), then the actors bound to it. Importing `workers.ai.client` (a
producer) never imports this module (DESIGN §1).
"""

from shared.bootstrap import boot_worker
from shared.observability.logging import redact_dramatiq_messages

from .settings import ai_settings

broker = boot_worker("ai")
# The kernel keeps payloads out of Dramatiq's lines; AI_LOG_CONTENT (debugging) lets them in.
redact_dramatiq_messages(enabled=not ai_settings().log_content)

from . import actors  # noqa: E402

actors.bind(broker)
