"""The ai domain's registration (entry point `jobfleet.domains`: `ai`): plain data."""

from shared.domains import Command, Domain, Process

DOMAIN = Domain(
    name="ai",
    jobs="workers.ai.jobs:JOBS",
    order=20,
    settings=("workers.ai.settings:AiSettings",),
    commands=(Command("ai", "workers.ai.cli:app", "AI tasks: run one, usage and cost per org."),),
    processes=(Process("worker-ai", "workers.ai.app"),),
    demo=("workers.ai.demo:scenario",),
    migrations="workers.ai.migrations",
    console="workers.ai.console",
    retries={"ai": {"max_attempts": 2, "min_backoff_ms": 5_000}},
)
