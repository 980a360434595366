"""The chain_actions worker: `dramatiq workers.chain_actions` (`make run-worker-chain-actions`)."""

from shared.bootstrap import boot_worker

broker = boot_worker("chain-actions")

from . import actors  # noqa: E402,F401  (binds the handlers to the broker above)
