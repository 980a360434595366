"""The scheduler's sections of `fleet status` (its `Domain.status`): `sections` reads them,
`render` prints them.

- scheduler: runs by job and outcome (the scheduler's Prometheus counters, read from any
  process's `/metrics`: they are aggregated over the fleet), and the last trace each periodic
  job leaves in Postgres (keeper actions, indexer cursor, due-email jobs, published events);
- indexer: the node's head minus the stored cursor (`chain/status.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.cli.status import Section, guard, parse_metrics

from .chain.status import indexer_section

if TYPE_CHECKING:
    from rich.console import Console

    from shared.config import Settings


def sections(settings: Settings, metrics: str | None) -> dict[str, Section]:
    return {
        "scheduler": {
            "runs": guard(lambda: scheduler_runs(metrics)),
            "last": guard(lambda: last_traces(settings)),
        },
        "indexer": guard(lambda: indexer_section(settings, metrics)),
    }


def scheduler_runs(metrics: str | None) -> Section:
    if metrics is None:
        return {"error": "no /metrics answered (is the fleet running?)"}
    jobs: dict[str, dict[str, int]] = {}
    for labels, value in parse_metrics(metrics, "jobfleet_scheduler_runs_total"):
        jobs.setdefault(labels["job"], {})[labels["outcome"]] = int(value)
    return jobs


def last_traces(settings: Settings) -> Section:
    """The latest row each periodic job writes (None when it never did)."""
    import psycopg

    queries = {
        "lottery-keeper": "SELECT ran_at, outcome FROM keeper_actions ORDER BY ran_at DESC LIMIT 1",
        "chain-indexer": "SELECT updated_at, 'block ' || block_number FROM chain_cursor"
        " ORDER BY updated_at DESC LIMIT 1",
        "email-run-due": "SELECT queued_at, status FROM job_runs WHERE job_name = 'email-seq:run_due'"
        " ORDER BY queued_at DESC LIMIT 1",
        "outbox-relay": "SELECT published_at, 'published' FROM outbox_events"
        " WHERE published_at IS NOT NULL ORDER BY published_at DESC LIMIT 1",
    }
    traces: Section = {}
    with psycopg.connect(settings.database_dsn, connect_timeout=2, autocommit=True) as conn:
        for job, sql in queries.items():
            try:
                row = conn.execute(sql).fetchone()
            except psycopg.errors.UndefinedTable:
                row = None
            traces[job] = {"at": row[0], "outcome": row[1]} if row else None
    return traces


def render(report: dict[str, Section], out: Console) -> None:
    from rich.table import Table

    from shared.cli.output import cell

    s: dict[str, Any] = report["scheduler"]
    sched = Table(title="scheduler", header_style="bold")
    for name in ("job", "runs ok", "errors", "last trace", "at"):
        sched.add_column(name)
    runs, last = s["runs"], s["last"]
    names = sorted(set(k for k in runs if k != "error") | set(k for k in last if k != "error"))
    for job in names:
        r, t = runs.get(job) or {}, last.get(job) or {}
        errors = r.get("error", 0) if isinstance(r, dict) else 0
        sched.add_row(job, cell(r.get("ok", "")), f"[red]{errors}[/red]" if errors else "0",
                      cell(t.get("outcome")), cell(t.get("at")))  # fmt: skip
    out.print(sched)
    for part in ("runs", "last"):
        if "error" in s[part]:
            out.print(f"  [yellow]scheduler {part}: {cell(s[part]['error'])}[/yellow]")

    i = report["indexer"]
    lag = (
        i.get("error")
        or i.get("note")
        or f"{i['lag']} block(s) (cursor {i['cursor']}, head {i['head']})"
    )
    out.print(f"[bold]indexer lag[/bold]: {cell(lag)}")
