"""The ai worker: `dramatiq workers.ai` (`make run-worker-ai`), booted by `app.py`.

Importing this package boots nothing, so that a producer can import `workers.ai.client`
without a broker, logging set-up or runtime (DESIGN §1). Only when Dramatiq's CLI names this
package as its broker module (`dramatiq workers.ai`, as the launcher and compose do) does it
load `app.py`, the worker process.
"""

import sys

if "dramatiq.cli" in sys.modules and __name__ in sys.argv[1:]:
    from .app import broker  # noqa: F401
