"""`fleet web`: the operator console (shared/console) under uvicorn.

    fleet web                          # http://127.0.0.1:8190 (CONSOLE_HOST, CONSOLE_PORT)
    fleet web --host 0.0.0.0           # refused unless CONSOLE_TOKEN or CONSOLE_USER/PASSWORD is set

`make run` starts it as one more supervised process (its URL in the ready table).
"""

from __future__ import annotations

from typing import Annotated

import typer

from . import output


def web(
    host: Annotated[
        str | None, typer.Option("--host", help="Interface (default: $CONSOLE_HOST, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default: $CONSOLE_PORT, 8190).")
    ] = None,
) -> None:
    """Serve the operator console: overview, runs, dead letters (replay, purge), outbox."""
    try:
        import uvicorn

        from shared.console.app import create_app
        from shared.console.settings import ConsoleSettings, UnsafeBind
    except ModuleNotFoundError as exc:
        output.error_line(f"the console needs the `api` extra ({exc.name} is missing)")
        raise typer.Exit(2) from exc
    overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    settings = ConsoleSettings(**overrides)  # type: ignore[arg-type]
    try:
        app = create_app(settings)
    except UnsafeBind as exc:
        output.error_line(str(exc))
        raise typer.Exit(2) from exc
    auth = "token" if settings.token else "basic auth" if settings.user else "no auth (loopback)"
    output.err.print(f"console: http://{settings.host}:{settings.port}/ ({auth})")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")
