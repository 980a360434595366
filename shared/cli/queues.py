"""`fleet queues`: pause a queue fleet-wide during an incident, resume it, see what is paused."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

import typer

from . import output
from .jobs import JsonOption
from .params import default_operator

app = typer.Typer(
    help="Queues: pause (consumers stop taking messages; sends still accepted), resume, "
    "concurrency limits, status.",
    no_args_is_help=True,
)

QueueArg = Annotated[str, typer.Argument(help="The queue (`fleet queues status`).")]
ByOption = Annotated[
    str | None, typer.Option("--by", help="Operator recorded in the audit (default: $USER@host).")
]


@app.command("pause")
def pause(
    queue: QueueArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why (kept in the audit).")],
    by: ByOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop every worker process from taking messages of QUEUE, within a second. Running jobs
    finish; what workers had taken but not started is handed back (not an attempt); sends keep
    being accepted. The pause is kept in Redis: restarts do not lift it."""
    from shared import pauses
    from shared.runtime import get_runtime

    info, changed = pauses.pause(get_runtime(), queue, by=by or default_operator(), reason=reason)
    if as_json:
        output.print_json({**info.as_dict(), "changed": changed})
        return
    if changed:
        output.note(
            f"paused {queue} (by {info.by}: {info.reason}); `fleet queues resume {queue}` lifts it"
        )
    else:
        output.note(
            f"{queue} was already paused by {info.by} at {info.at:%Y-%m-%d %H:%M:%S} UTC: {info.reason}"
        )


@app.command("resume")
def resume(
    queue: QueueArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why (kept in the audit).")] = "",
    by: ByOption = None,
    as_json: JsonOption = False,
) -> None:
    """Let workers take messages of QUEUE again (within a second)."""
    from shared import pauses
    from shared.runtime import get_runtime

    ended = pauses.resume(get_runtime(), queue, by=by or default_operator(), reason=reason)
    if as_json:
        output.print_json(
            {
                "queue": queue,
                "resumed": ended is not None,
                "pause": ended.as_dict() if ended else None,
            }
        )
        return
    output.note(f"resumed {queue}" if ended else f"{queue} was not paused")


@app.command("limit")
def limit(
    queue: QueueArg,
    running: Annotated[
        str, typer.Argument(help="Most running jobs, fleet-wide (a whole number), or `none`.")
    ],
    org: Annotated[
        UUID | None, typer.Option("--org", help="The limit of this org's jobs only.")
    ] = None,
    per_org: Annotated[
        bool, typer.Option("--per-org", help="The limit of each org's jobs (every org).")
    ] = False,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why (kept in the audit).")] = "",
    by: ByOption = None,
    as_json: JsonOption = False,
) -> None:
    """Limit the jobs of QUEUE running at once over every worker process: the queue's own
    limit, or each org's (--per-org), or one org's (--org). A job over a limit waits in the
    queue (no attempt spent) until a slot frees. `none` lifts it. Audited like a pause."""
    from shared import limits
    from shared.runtime import get_runtime

    value: int | None
    if running.strip().lower() == "none":
        value = None
    else:
        try:
            value = int(running)
        except ValueError:
            raise limits.InvalidLimit(
                f"invalid limit {running!r}: a whole number of running jobs, or none"
            ) from None
    before, after = limits.set_limit(
        get_runtime(),
        queue,
        value,
        by=by or default_operator(),
        reason=reason,
        org=org,
        per_org=per_org,
    )
    scope = f"org {org}" if org else "each org" if per_org else "the queue"
    if as_json:
        scope_key = f"org:{org}" if org else "org" if per_org else "queue"
        output.print_json({"queue": queue, "scope": scope_key, "before": before, "limit": after})
        return
    shown = "no limit" if after is None else f"at most {after} running"
    was = "" if before == after else f" (was {'no limit' if before is None else before})"
    output.note(f"{queue}, {scope}: {shown}{was}")


@app.command("status")
def status(as_json: JsonOption = False) -> None:
    """Every queue: paused or not (who, since when, why), its concurrency limits, and the last
    pause/resume/limit actions."""
    from shared import pauses
    from shared.jobs import catalog
    from shared.limits import queue_limits, summary
    from shared.runtime import get_runtime

    rt = get_runtime()
    paused = pauses.paused_everywhere(rt.queue_servers, rt.settings.broker_namespace)
    rows = [
        {
            "queue": q,
            "state": "PAUSED" if q in paused else "running",
            **(
                {k: v for k, v in paused[q].as_dict().items() if k != "queue"}
                if q in paused
                else {}
            ),
            "limits": queue_limits(rt.queue_servers.client(q), rt.settings, q).as_dict(),
        }
        for q in sorted(set(catalog.QUEUES) | set(paused))
    ]
    if as_json:
        output.print_json({"queues": rows, "audit": pauses.history(rt, limit=20)})
        return
    output.print_table(
        ["queue", "state", "by", "since", "reason", "limits"],
        [
            [
                r["queue"],
                r["state"],
                r.get("by", ""),
                r.get("at", ""),
                r.get("reason", ""),
                summary(r["limits"]),
            ]
            for r in rows
        ],
        fold=["reason", "limits"],
    )
