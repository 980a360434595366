"""The chain-actions domain's registration (entry point `jobfleet.domains`: `chain_actions`).

It registers the EVM library's settings (`CHAIN_*`) and `fleet wallets` too: the worker is the
library's first user (the scheduler uses the same settings and wallets).
"""

from shared.domains import Command, Domain, Process

DOMAIN = Domain(
    name="chain_actions",
    jobs="workers.chain_actions.jobs:JOBS",
    order=50,
    settings=("chain.settings:ChainSettings",),
    commands=(
        Command("wallets", "chain.cli:wallets_app", "Custodial wallets (keys encrypted at rest)."),
    ),
    processes=(Process("worker-chain-actions", "workers.chain_actions.app"),),
    services=("workers.chain_actions.embedded:start",),
    migrations="chain.migrations",
    retries={"chain-actions": {"max_attempts": 5, "min_backoff_ms": 1_000}},
)
