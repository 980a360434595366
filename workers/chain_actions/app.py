"""The chain-actions worker process: `dramatiq workers.chain_actions.app`
(`make run-worker-chain-actions`).

The only module of the domain that boots anything: the worker's broker (installed globally, with
its runtime and logging), then the actors bound to it. Importing `workers.chain_actions.client`
(a producer) never imports this module (DESIGN §1).
"""

from shared.bootstrap import boot_worker

broker = boot_worker("chain-actions")

from . import actors  # noqa: E402

actors.bind(broker)
