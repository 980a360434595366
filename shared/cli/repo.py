"""`fleet repo sync`: write the repository's files that follow the registrations (shared/repo_sync.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import output

app = typer.Typer(
    help="This repository's files that follow the registrations (compose, Kubernetes, "
    "schema snapshots, the README's settings).",
    no_args_is_help=True,
)


def _root(path: Path) -> Path:
    root = path.resolve()
    if not (root / "pyproject.toml").is_file():
        raise typer.BadParameter(f"{root} is not the repository's root (no pyproject.toml)")
    return root


@app.command("sync")
def sync(
    root: Annotated[
        Path, typer.Option("--root", help="The repository's root (default: here).")
    ] = Path("."),
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 when a file differs.")
    ] = False,
) -> None:
    """After adding a domain, a process or a job: compose and Kubernetes entries per process,
    a ScaledObject per worker, a schema snapshot per new job version, the README's settings."""
    from shared.repo_sync import apply, changes

    where = _root(root)
    found = changes(where)
    for change in found:
        output.out.print(f"{'differs' if check else 'wrote'}: {change.path}")
    if check:
        if found:
            output.err.print(f"{len(found)} file(s) differ: run `fleet repo sync`")
            raise typer.Exit(1)
        output.out.print("every file follows the registrations")
        return
    apply(where, found)
    output.out.print(f"{len(found)} file(s) written" if found else "nothing to write")
