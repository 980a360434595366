"""The notes domain's registration (entry point `jobfleet.domains`: `notes`): plain data."""

from shared.domains import Command, Domain, Process

DOMAIN = Domain(
    name="notes",
    order=60,
    settings=("jf_notes.settings:NotesSettings",),
    commands=(Command("notes", "jf_notes.cli:app", "Notes: a sixth domain."),),
    processes=(Process("worker-notes", "jf_notes.app"),),
    demo=("jf_notes.demo:scenario",),
    migrations="jf_notes.migrations",
    retries={"notes": {"max_attempts": 2, "min_backoff_ms": 100}},
    jobs="jf_notes.jobs:JOBS",
)
