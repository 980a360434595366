"""The scheduler's registration (entry point `jobfleet.domains`: `scheduler`): plain data."""

from shared.domains import Command, Domain, Process

DOMAIN = Domain(
    name="scheduler",
    order=90,
    settings=(
        "scheduler.settings:SchedulerSettings",
        "scheduler.settings:IndexerSettings",
        "scheduler.settings:KeeperSettings",
    ),
    commands=(
        Command(
            "schedule",
            "scheduler.cli:app",
            "Periodic jobs of the scheduler: list, pause, resume, run now (audited).",
        ),
        Command(
            "chain",
            "scheduler.chain.cli:app",
            "Blockchain: reference contracts, node status, indexer cursor, lottery keeper.",
        ),
    ),
    # The chain indexer and the lottery keeper read the chain_actions domain's EVM node.
    processes=(Process("scheduler", "scheduler", kind="python", uses=("chain_actions",)),),
    demo=("scheduler.chain.demo:scenario",),
    migrations="scheduler.migrations",
    console="scheduler.console",
    status="scheduler.status",
)
