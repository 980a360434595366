"""The doc worker: `dramatiq workers.doc` (`make run-worker-doc`), booted by `app.py`.

Importing this package boots nothing, so that a producer can import `workers.doc.client`
without a broker, logging set-up or runtime (DESIGN §1). Only when Dramatiq's CLI names this
package as its broker module (`dramatiq workers.doc`, as the launcher and compose do) does it
load `app.py`, the worker process.
"""

import sys

if "dramatiq.cli" in sys.modules and __name__ in sys.argv[1:]:
    from .app import broker  # noqa: F401
