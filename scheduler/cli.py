"""`fleet schedule`: the scheduler's periodic jobs: list, pause, resume, run now (audited).

The state is in Redis (`shared/periodic.py`), so it acts on every scheduler replica at once and
outlives their restarts. The lottery keeper's own pause (the contract's `paused()`, an on-chain
switch that `fleet chain` reports) is distinct: pausing the `lottery-keeper` job here stops the
scheduler from calling the contract at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from shared import pauses, periodic
from shared.cli import output
from shared.cli.jobs import JsonOption
from shared.cli.params import default_operator

from .schedule import SCHEDULE

if TYPE_CHECKING:
    from shared.runtime import Runtime

app = typer.Typer(
    help="Periodic jobs of the scheduler: list, pause, resume, run-now (audited).",
    no_args_is_help=True,
)

NAMES = tuple(job.name for job in SCHEDULE)
JobArg = Annotated[str, typer.Argument(help=f"One of: {', '.join(NAMES)}.")]
ReasonOption = Annotated[str, typer.Option("--reason", "-r", help="Why (kept in the audit).")]
ByOption = Annotated[
    str | None, typer.Option("--by", help="Operator recorded in the audit (default: $USER@host).")
]


def _runtime() -> Runtime:
    from shared.runtime import get_runtime

    return get_runtime()


@app.command("list")
def list_jobs(as_json: JsonOption = False) -> None:
    """Each periodic job: every how long, paused or not, its last run and outcome, the next."""
    rt = _runtime()
    states = periodic.states(pauses.redis_client(rt), rt.settings.broker_namespace, NAMES)
    every = {job.name: job.interval_s() for job in SCHEDULE}
    if as_json:
        output.print_json([{**s.as_dict(), "interval_s": every[s.name]} for s in states])
        return
    rows = []
    for s in states:
        last = s.last or {}
        state = f"PAUSED by {s.paused['by']}: {s.paused['reason']}" if s.paused else "scheduled"
        rows.append(
            [
                s.name,
                f"{every[s.name]:g} s",
                state + (" (run-now asked)" if s.run_now_requested else ""),
                last.get("at", "never"),
                last.get("outcome", "") + (f" ({last['detail']})" if last.get("detail") else ""),
                last.get("next_at", ""),
            ]
        )
    output.print_table(
        ["job", "every", "state", "last run", "outcome", "next run"], rows, fold=["state"]
    )


@app.command("pause")
def pause(job: JobArg, reason: ReasonOption, by: ByOption = None) -> None:
    """Skip JOB's runs on every replica until resumed (each skip counted as outcome `paused`)."""
    who = by or default_operator()
    changed = periodic.pause(_runtime(), job, by=who, reason=reason, known=NAMES)
    output.note(f"paused {job}" if changed else f"{job} was already paused")


@app.command("resume")
def resume(
    job: JobArg, reason: Annotated[str, typer.Option("--reason", "-r")] = "", by: ByOption = None
) -> None:
    """Let JOB run on its schedule again."""
    changed = periodic.resume(
        _runtime(), job, by=by or default_operator(), reason=reason, known=NAMES
    )
    output.note(f"resumed {job}" if changed else f"{job} was not paused")


@app.command("run-now")
def run_now(
    job: JobArg, reason: Annotated[str, typer.Option("--reason", "-r")] = "", by: ByOption = None
) -> None:
    """Run JOB once, now (paused or not), on one scheduler replica, under the job's own locks."""
    periodic.run_now(_runtime(), job, by=by or default_operator(), reason=reason, known=NAMES)
    output.note(f"asked the scheduler to run {job} now; `fleet schedule list` shows its outcome")
