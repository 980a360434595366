"""`fleet ai ...`: usage and cost per org, running a task by hand, showing a task's result.

The domain's registration names it (`fleet ai`); the fleet CLI imports it only when the
command runs.
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Any

import typer

app = typer.Typer(help="AI worker: usage and cost per org, tasks.", no_args_is_help=True)


def parse_since(text: str, today: date) -> date:
    """`2026-11-01`, or a duration back from today (`7d`, `2w`)."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        pass
    from shared.cli.params import parse_duration

    try:
        return today - parse_duration(text)
    except typer.BadParameter:
        raise typer.BadParameter(
            f"{text!r} is neither a date (YYYY-MM-DD) nor a duration like 7d"
        ) from None


@app.command()
def usage(
    org: Annotated[uuid.UUID, typer.Option(help="Org id")],
    since: Annotated[
        str, typer.Option(help="First day (YYYY-MM-DD, UTC) or a duration back (7d)")
    ] = "30d",
    until: Annotated[str | None, typer.Option(help="Last day (YYYY-MM-DD), default today")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout")] = False,
) -> None:
    """Requests, tokens and cost of ORG per day and model, with totals."""
    from shared.cli import output
    from shared.runtime import get_runtime

    from .usage import report

    today = datetime.now(UTC).date()
    first = parse_since(since, today)
    last = date.fromisoformat(until) if until else None
    with get_runtime().pool.connection() as conn:
        rows = report(conn, org, first, last)
    cost = sum((r.cost for r in rows), Decimal(0))
    totals: dict[str, Any] = {
        "requests": sum(r.requests for r in rows),
        "tokens_in": sum(r.tokens_in for r in rows),
        "tokens_out": sum(r.tokens_out for r in rows),
    }
    if as_json:
        output.print_json(
            {
                "org_id": str(org),
                "since": first,
                "until": last,
                "rows": [{**r.__dict__, "cost": str(r.cost)} for r in rows],
                "total": {**totals, "cost": str(cost)},
            }
        )
        return
    table: list[tuple[Any, ...]] = [
        (r.day, r.model, r.requests, r.tokens_in, r.tokens_out, _usd(r.cost)) for r in rows
    ]
    table.append(
        (
            "total",
            "",
            totals["requests"],
            totals["tokens_in"],
            totals["tokens_out"],
            _usd(cost),
        )
    )
    output.print_table(
        ["day", "model", "requests", "tokens in", "tokens out", "cost (USD)"],
        [[output.cell(v) for v in row] for row in table],
        title=f"AI usage of {org} since {first.isoformat()}",
    )


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="summarize, extract, classify or embed")],
    text: Annotated[list[str], typer.Argument(help="Input text (several for embed)")],
    org: Annotated[uuid.UUID, typer.Option(help="Org id")],
    params: Annotated[
        str, typer.Option(help='Task params as JSON, e.g. \'{"labels": ["a", "b"]}\'')
    ] = "{}",
) -> None:
    """Create an AI task and send `ai:run` for it; prints the task and job ids."""
    from shared.cli.params import load_payload
    from shared.jobs import catalog

    payload = {
        "org_id": str(org),
        "entity_id": str(uuid.uuid4()),
        "task": task,
        "input": text if task == "embed" else " ".join(text),
        "params": load_payload(params),
    }
    sent = catalog.AI_RUN.send(payload)
    typer.echo(f"task {payload['entity_id']}\njob {sent.job_id}")


@app.command()
def show(
    task_id: Annotated[uuid.UUID, typer.Argument(help="ai_tasks id")],
    org: Annotated[uuid.UUID, typer.Option(help="Org id")],
) -> None:
    """A task's status, usage and result (JSON)."""
    from shared.cli import output
    from shared.errors import RunNotFound
    from shared.runtime import get_runtime

    from .store import get

    with get_runtime().pool.connection() as conn:
        row = get(conn, task_id, org)
        detail: Any = None
        if row is not None:
            detail = conn.execute("SELECT error FROM ai_tasks WHERE id = %s", (task_id,)).fetchone()
    if row is None:
        raise RunNotFound(f"no AI task {task_id} in org {org}")
    data = {**row.__dict__, "cost": str(row.cost), "error": detail[0] if detail else None}
    data.pop("input", None)
    output.print_json(data)


def _usd(value: Decimal) -> str:
    return f"{value:.6f}"
