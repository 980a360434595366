"""`fleet outbox`: run the relay (once, or as a loop stopped cleanly by Ctrl-C) and list events."""

from __future__ import annotations

import signal
import threading
from datetime import UTC, datetime
from types import FrameType
from typing import Annotated, Any

import typer

from ..jobs.statuses import OUTBOX_STATUSES
from . import output
from .jobs import JsonOption
from .params import one_of

app = typer.Typer(
    help="Transactional outbox: relay events to the broker, list them.", no_args_is_help=True
)


LIST_SQL = """
SELECT id, org_id, type, job_name, job_id, status, attempts, next_attempt_at, locked_by,
       created_at, published_at, error
  FROM outbox_events
 WHERE (%(status)s::text IS NULL OR status = %(status)s)
 ORDER BY created_at DESC
 LIMIT %(limit)s
"""


@app.command("relay")
def relay(
    once: Annotated[
        bool, typer.Option("--once", help="One pass over the due events, then exit.")
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval", min=0.05, help="Seconds between passes when idle (NOTIFY wakes it)."
        ),
    ] = 1.0,
    as_json: JsonOption = False,
) -> None:
    """Publish committed outbox events (SKIP LOCKED: several relays may run at once)."""
    from shared import outbox
    from shared.runtime import get_runtime

    runtime = get_runtime()
    if once:
        stats = outbox.relay_once(runtime, now=datetime.now(UTC))
        summary = {**stats.__dict__, "claimed": stats.claimed}
        if as_json:
            output.print_json(summary)
        else:
            output.out.print(" ".join(f"{k}={v}" for k, v in summary.items()))
        return
    from shared.observability.logging import configure_logging

    settings = runtime.settings
    configure_logging(level=settings.log_level, fmt=settings.log_format, process="outbox-relay")
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for sig in previous:
        signal.signal(sig, _stop)
    output.note("outbox relay running; Ctrl-C to stop")
    try:
        outbox.run_relay(runtime, stop, interval_s=interval)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    output.note("outbox relay stopped")


@app.command("list")
def list_events(
    status: Annotated[
        str | None, typer.Option("--status", help=f"One of {', '.join(OUTBOX_STATUSES)}.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=10_000, help="Most events shown.")
    ] = 50,
    as_json: JsonOption = False,
) -> None:
    """List outbox events, newest first."""
    from psycopg.rows import dict_row

    from shared.runtime import get_runtime

    params: dict[str, Any] = {
        "status": one_of(status, OUTBOX_STATUSES, option="--status"),
        "limit": limit,
    }
    with get_runtime().pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(LIST_SQL, params).fetchall()
    if as_json:
        output.print_json(rows)
        return
    output.print_table(
        ("id", "job", "status", "attempts", "next_attempt_at", "published_at", "error"),
        (
            (
                output.cell(r["id"]),
                output.cell(r["job_name"]),
                output.cell(r["status"]),
                output.cell(r["attempts"]),
                output.cell(r["next_attempt_at"]),
                output.cell(r["published_at"]),
                output.cell(r["error"], width=50),
            )
            for r in rows
        ),
        title="Outbox events",
        fold=("id",),
    )
