"""The export domain's registration (entry point `jobfleet.domains`: `export`): plain data."""

from shared.domains import Command, Domain, Process

DOMAIN = Domain(
    name="export",
    order=30,
    settings=("workers.export.settings:ExportSettings",),
    commands=(
        Command(
            "export",
            "workers.export.cli:app",
            "Exports: request, status, download links (presigned or signed).",
        ),
    ),
    processes=(Process("worker-export", "workers.export.app"),),
    demo=("workers.export.demo:scenario",),
    migrations="workers.export.migrations",
    retries={"export": {"max_attempts": 3, "min_backoff_ms": 5_000}},
)
