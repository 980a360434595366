"""The doc domain's registration (entry point `jobfleet.domains`: `doc`): plain data."""

from shared.domains import Command, Domain, Process

DOMAIN = Domain(
    name="doc",
    jobs="workers.doc.jobs:JOBS",
    order=40,
    settings=("workers.doc.settings:DocSettings",),
    commands=(
        Command("doc", "workers.doc.cli:app", "Documents: ingest PDFs, status, full-text search."),
    ),
    processes=(Process("worker-doc", "workers.doc.app"),),
    demo=("workers.doc.demo:scenario",),
    migrations="workers.doc.migrations",
    retries={"doc": {"max_attempts": 5, "min_backoff_ms": 3_000}},
)
