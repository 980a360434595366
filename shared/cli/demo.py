"""`fleet demo`: a realistic workload through every worker of a running fleet (`make run`).

It runs, as a demo tenant (a new org id each run), the scenario each domain registers
(`Domain.demo`): a few jobs of each kind a domain's worker runs, some through its periodic
jobs too, and, like a frontend, jobs sent over HTTP through the example product API when it
runs. Then it shows a live table of the runs by queue and status until every run settles and
every scenario reached its result, and says where to look at each result. Exit code 0 when every run completed, 1 otherwise.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from datetime import datetime
from typing import Annotated, Any

import typer

from shared.jobs.statuses import TERMINAL_STATUSES
from shared.runtime import Runtime

from .scenario import Scenario

STATUSES = ("STAGED", "QUEUED", "RUNNING", "FAILED", "COMPLETED", "DEAD", "CANCELED")
SETTLED = TERMINAL_STATUSES


def scenarios(org: uuid.UUID, *, small: bool) -> list[Scenario]:
    """One scenario per registered demo step (`scenario(org, small=...)`), in fleet order."""
    from shared.domains import hooks

    return [make(org, small=small) for make in hooks("demo")]


def counts(rt: Runtime, since: datetime) -> Counter[tuple[str, str]]:
    """Runs queued since `since`, by (queue, status)."""
    with rt.pool.connection() as conn:
        rows = conn.execute(
            "SELECT queue, status, count(*) FROM job_runs WHERE queued_at >= %s GROUP BY 1, 2",
            (since,),
        ).fetchall()
    return Counter({(q, s): n for q, s, n in rows})


def settled(tally: Counter[tuple[str, str]]) -> bool:
    return bool(tally) and all(s in SETTLED for (_, s), n in tally.items() if n)


def table(tally: Counter[tuple[str, str]], waiting: list[str], elapsed: float) -> Any:
    from rich.table import Table

    from shared.jobs import catalog

    title = f"jobs by worker ({elapsed:.0f} s)"
    if waiting:
        title += f"; waiting for: {', '.join(waiting)}"
    view = Table(title=title, header_style="bold")
    view.add_column("queue")
    for status in STATUSES:
        view.add_column(status.lower(), justify="right")
    for queue in catalog.QUEUES:
        cells = [tally.get((queue, s), 0) for s in STATUSES]
        view.add_row(queue, *(_styled(s, n) for s, n in zip(STATUSES, cells, strict=True)))
    return view


def _styled(status: str, n: int) -> str:
    if not n:
        return "[dim]0[/dim]"
    colour = {"COMPLETED": "green", "DEAD": "red", "FAILED": "yellow"}.get(status)
    return f"[{colour}]{n}[/{colour}]" if colour else str(n)


def run_demo(
    rt: Runtime, plan: list[Scenario], *, timeout_s: float, refresh_s: float = 0.5
) -> tuple[bool, Counter[tuple[str, str]]]:
    """Start every scenario, then refresh until all settle or `timeout_s`; (settled, tally)."""
    from rich.live import Live

    from .output import err, out

    with rt.pool.connection() as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    since: datetime = row[0]
    for scenario in plan:
        err.print(f"[bold]{scenario.name}[/bold]: starting")
        scenario.start(rt)
        if scenario.skipped:
            err.print(f"  [yellow]skipped[/yellow]: {scenario.skipped}")
    started = time.monotonic()
    done = False
    tally: Counter[tuple[str, str]] = Counter()
    with Live(console=out, refresh_per_second=4) as live:
        while True:
            waiting = [s.name for s in plan if not s.skipped and s.pending(rt)]
            for scenario in plan:
                if scenario.name in waiting:
                    scenario.tick(rt)
            rt.sender.flush()  # the QUEUED rows of what was just sent, before counting
            tally = counts(rt, since)
            elapsed = time.monotonic() - started
            live.update(table(tally, waiting, elapsed))
            if not waiting and settled(tally):
                done = True
                break
            if elapsed > timeout_s:
                break
            time.sleep(refresh_s)
    err.print(f"settled: {done} after {time.monotonic() - started:.1f} s")
    return done, tally


def demo(
    small: Annotated[
        bool,
        typer.Option(
            "--small",
            help="A lighter run (each scenario's small inputs): every worker still works.",
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for everything to settle.")
    ] = 300.0,
) -> None:
    """Send a realistic workload through every worker and watch it settle (needs `make run`)."""
    from shared.runtime import get_runtime

    from .output import err, out

    rt = get_runtime()
    org = uuid.uuid4()
    err.print(f"demo tenant (org id): {org}")
    plan = scenarios(org, small=small)
    done, tally = run_demo(rt, plan, timeout_s=timeout)
    out.print("\n[bold]where to look[/bold]")
    for scenario in plan:
        for line in scenario.results(rt):
            out.print(f"  - {line}", markup=False)
    out.print(
        f"  - every run of this demo: `fleet jobs list --org {org}`; `fleet status`", markup=False
    )
    failed = sum(n for (_, s), n in tally.items() if s != "COMPLETED")
    if not done:
        err.print(f"[red]not settled after {timeout:.0f} s[/red]: see `fleet status` and var/log/")
        raise typer.Exit(1)
    if failed:
        err.print(f"[red]{failed} run(s) did not complete[/red]: `fleet dlq list`")
        raise typer.Exit(1)
    total = sum(tally.values())
    err.print(f"[green]all {total} runs completed[/green]")
