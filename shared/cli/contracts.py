"""`fleet contracts`: the payload contracts of every job, listed, exported as JSON Schema, checked."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import output
from .jobs import JsonOption

app = typer.Typer(
    help="Payload contracts: list, export as JSON Schema, check against a snapshot.",
    no_args_is_help=True,
)


@app.command("list")
def list_contracts(as_json: JsonOption = False) -> None:
    """Every job: queue, accepted payload versions, latest, and what its job id is made of."""
    from shared.jobs import catalog

    from .schemas import index

    entries = index(catalog.ALL)
    for spec in catalog.ALL:
        latest = spec.contract.latest
        stable = latest.stable_fields
        entries[spec.name]["job_id"] = (
            "custom" if spec.custom_id else ",".join(stable) if stable else "all fields but v"
        )
        entries[spec.name]["entity_type"] = spec.entity_type
    if as_json:
        output.print_json(entries)
        return
    output.print_table(
        ("job", "queue", "versions", "latest", "entity", "job id from"),
        (
            (
                output.cell(name),
                output.cell(e["queue"]),
                output.cell(",".join(f"v{v}" for v in e["versions"])),
                output.cell(f"v{e['latest']}"),
                output.cell(e["entity_type"]),
                output.cell(e["job_id"]),
            )
            for name, e in entries.items()
        ),
        title="Contracts",
    )


@app.command("export")
def export(
    directory: Annotated[
        Path, typer.Argument(help="Where to write the schemas (created if missing).")
    ],
    clean: Annotated[
        bool,
        typer.Option(
            "--clean", help="Also delete *.schema.json files of versions no job declares."
        ),
    ] = False,
) -> None:
    """Write one JSON Schema per job and version (`<queue>.<job>.v<N>.schema.json`) and index.json."""
    from shared.jobs import catalog

    from .schemas import write

    written = write(directory, catalog.ALL, clean=clean)
    output.out.print(f"wrote {len(written)} file(s) to {output.cell(directory)}")


@app.command("check")
def check(
    directory: Annotated[
        Path,
        typer.Argument(
            help="A snapshot written by `fleet contracts export`.", exists=True, file_okay=False
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Compare the current contracts with a snapshot; exit 1 on an incompatible change."""
    from shared.jobs import catalog

    from .schemas import documents, drift, read

    found = drift(read(directory), documents(catalog.ALL))
    if as_json:
        output.print_json([d.__dict__ for d in found])
    else:
        for d in found:
            output.out.print(f"{d.kind:<12} {output.cell(d.file)}")
            for problem in d.problems:
                output.out.print(f"    {output.cell(problem)}")
        if not found:
            output.out.print("contracts match the snapshot")
    if any(d.kind in ("incompatible", "removed") for d in found):
        raise typer.Exit(1)
