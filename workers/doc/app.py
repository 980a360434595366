"""The doc worker process: `dramatiq workers.doc.app`.

The only module of the domain that boots anything: the worker's broker (installed globally, with
its runtime and logging), then the actors bound to it. Importing `workers.doc.client` (a
producer) never imports this module (DESIGN §1).
"""

from shared.bootstrap import boot_worker

broker = boot_worker("doc")

from . import actors  # noqa: E402

actors.bind(broker)
