"""The scheduler's registration (entry point `jobfleet.domains`: `scheduler`): plain data."""

from shared.domains import Command, Domain, PeriodicJob, Process

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
            panel=None,
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
    periodic=(
        # One active indexer across replicas: a Postgres advisory lock per window transaction.
        PeriodicJob(
            "chain-indexer", "scheduler.chain.jobs:index", "scheduler.settings:indexer_interval_s"
        ),
        # One active keeper across replicas: the Redis lock `KEEPER_LOCK_KEY`, fenced.
        PeriodicJob(
            "lottery-keeper", "scheduler.chain.jobs:keep", "scheduler.settings:keeper_interval_s"
        ),
    ),
)
