"""The export domain's registration (entry point `jobfleet.domains`: `export`): plain data."""

from shared.domains import Command, Domain, Process

DOMAIN = Domain(
    name="export",
    jobs="workers.export.jobs:JOBS",
    order=30,
    settings=("workers.export.settings:ExportSettings",),
    commands=(
        Command(
            "export",
            "workers.export.cli:app",
            "Exports: request, status, download links (presigned or signed).",
        ),
    ),
    processes=(
        Process("worker-export", "workers.export.app"),
        # Local signed download links (`fleet export serve-links` as a process of `make run`).
        Process(
            "export-links",
            "workers.export.links",
            kind="extra",
            port_env="EXPORT_LINKS_PORT",
            port=9180,
            summary="export download links (local storage): {url}/files/...",
        ),
    ),
    demo=("workers.export.demo:scenario",),
    migrations="workers.export.migrations",
    retries={"export": {"max_attempts": 3, "min_backoff_ms": 5_000}},
)
