"""`fleet run`: the whole fleet on this machine (what `make run` starts).

See `shared/launcher/app.py` for what it does; `launch()` is re-exported for other callers.
"""

from __future__ import annotations

from typing import Annotated

import typer

from shared.launcher.app import launch
from shared.launcher.plan import extra_names, names

KNOWN = (*names(), *extra_names())


def run(
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help=f"Run only these processes (repeatable): {', '.join(KNOWN)}. Starts only the embedded services those use (local stand-ins for their servers).",
        ),
    ] = None,
    var_dir: Annotated[
        str | None,
        typer.Option("--var-dir", help="Local state directory (default: $VAR_DIR or ./var)."),
    ] = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="Run `fleet demo` once every process is ready.")
    ] = False,
) -> None:
    """Start Redis and Postgres (configured or embedded), migrate, run every worker and the
    scheduler under a supervisor; Ctrl-C stops everything."""
    unknown = sorted(set(only or ()) - set(KNOWN))
    if unknown:
        raise typer.BadParameter(f"unknown process {', '.join(unknown)}; known: {', '.join(KNOWN)}")
    code = launch(only=only or (), var_dir=var_dir, demo=demo)
    raise typer.Exit(code)


__all__ = ["launch", "run"]
