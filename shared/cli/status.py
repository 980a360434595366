"""`fleet status`: the one screen an operator reads first.

What it shows and where each figure comes from:
- queues: ready and delayed messages (Redis lists of the broker, each on the Redis that carries
  its queue: REDIS_QUEUE_URLS, named in a `redis` column once there are several), dead runs
  (`job_runs`);
- workers: consumers with a fresh heartbeat (`<namespace>:__heartbeats__`, on every server),
  and each process of
  the launcher's state file (`var/run/fleet.json`, written by `make run`) with its
  `/health/ready` answer;
- outbox backlog: PENDING events and the age of the oldest;
- postgres connections: in use (all databases, this one, active) against `max_connections`;
- the domains' sections (`Domain.status` in their registrations, e.g. the periodic jobs' last
  runs and how far a domain lags behind its source), each read from the fleet's `/metrics` and
  Postgres by the domain itself.

Every section degrades on its own: an unreachable source is reported and the others are still
shown; the command then exits 1 (naming what it could not read), so that scripts can alert.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from shared.config import Settings, get_settings

from . import output

Section = dict[str, Any]


def guard(section: Callable[[], Section]) -> Section:
    try:
        return section()
    except Exception as exc:
        return {
            "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        }


# -- sources ---------------------------------------------------------------------------------


def _servers(settings: Settings) -> Any:
    from shared.queue_servers import QueueServers

    return QueueServers(settings, socket_timeout=2, socket_connect_timeout=2)


def queues(settings: Settings) -> Section:
    """Each queue read on the Redis that carries it (REDIS_QUEUE_URLS), which it names."""
    from shared.jobs import catalog
    from shared.limits import queue_limits
    from shared.observability.probes import queue_depths
    from shared.pauses import paused_everywhere
    from shared.queue_servers import label, server_of

    servers = _servers(settings)
    try:
        depth = queue_depths(servers, settings, catalog.QUEUES)
        paused = paused_everywhere(servers, settings.broker_namespace)
        limits = {q: queue_limits(servers.client(q), settings, q) for q in catalog.QUEUES}
    finally:
        servers.close()
    return {
        q: {
            **{state: int(depth[(q, state)]) for state in ("ready", "delayed", "dead")},
            "paused": paused[q].as_dict() if q in paused else None,
            "server": label(server_of(settings, q)),
            # Taken by a worker and not yet acknowledged, fleet-wide, and the limits in force.
            **{k: v for k, v in limits[q].as_dict().items() if k != "queue"},
        }
        for q in catalog.QUEUES
    }


def heartbeats(settings: Settings, *, now_ms: float | None = None) -> Section:
    """Consumers whose heartbeat is younger than `heartbeat_timeout_ms` (Dramatiq's own rule),
    on every Redis server of the queues (a worker beats on its queues' server)."""
    from shared.observability.probes import heartbeats as read

    servers = _servers(settings)
    try:
        beats, dead_raw = read(servers, settings.broker_namespace)
    finally:
        servers.close()
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    ages = [now_ms - float(score) for _, score in beats]
    alive = [age for age in ages if age < settings.heartbeat_timeout_ms]
    # Workers whose consumer thread died (the process beats on, but fetches nothing from them).
    dead: dict[str, list[str]] = {}
    for worker, raw in dead_raw.items():
        entry = json.loads(raw)
        if now_ms - float(entry["at"]) < settings.heartbeat_timeout_ms:
            dead[worker.decode() if isinstance(worker, bytes) else str(worker)] = entry["queues"]
    return {"alive": len(alive), "stale": len(beats) - len(alive), "dead_consumers": dead}


def processes(state_file: Path) -> Section:
    """The launcher's processes and their readiness; empty when no `make run` wrote a state."""
    if not state_file.exists():
        return {"state_file": str(state_file), "processes": []}
    from shared.launcher.status import readiness

    state = json.loads(state_file.read_text())
    rows = []
    for p in state.get("processes", []):
        ready = "stopped" if state.get("stopped") else readiness(p["health_url"], timeout=1.0)
        rows.append({**p, "state": ready})
    return {
        "state_file": str(state_file),
        "stopped": state.get("stopped", False),
        "processes": rows,
    }


def parse_metrics(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Samples of metric `name` in Prometheus text format: (labels, value)."""
    from prometheus_client.parser import text_string_to_metric_families

    found = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found.append((dict(sample.labels), float(sample.value)))
    return found


def scrape(urls: list[str], token: str | None) -> str | None:
    """The first `/metrics` page that answers (any process serves the fleet's aggregate)."""
    for url in urls:
        request = urllib.request.Request(f"{url}/metrics")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return str(response.read().decode())
        except (OSError, ValueError):
            continue
    return None


def outbox_backlog(settings: Settings) -> Section:
    import psycopg

    with psycopg.connect(settings.database_dsn, connect_timeout=2, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'PENDING'),"
            " count(*) FILTER (WHERE status = 'FAILED'),"
            " extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'PENDING'))"
            " FROM outbox_events"
        ).fetchone()
    assert row is not None
    return {
        "pending": int(row[0]),
        "failed": int(row[1]),
        "oldest_pending_s": None if row[2] is None else round(float(row[2]), 1),
    }


def connections(settings: Settings) -> Section:
    """Postgres connections in use, by database and application, against `max_connections`
    (each process's pool is DB_POOL_SIZE at most, plus its run writer's 2)."""
    import psycopg

    with psycopg.connect(settings.database_dsn, connect_timeout=2, autocommit=True) as conn:
        limit = int(conn.execute("SHOW max_connections").fetchone()[0])  # type: ignore[index]
        reserved = int(
            conn.execute("SHOW superuser_reserved_connections").fetchone()[0]  # type: ignore[index]
        )
        rows = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE datname = current_database()),"
            " count(*) FILTER (WHERE datname = current_database() AND state = 'active')"
            " FROM pg_stat_activity WHERE backend_type = 'client backend'"
        ).fetchone()
    assert rows is not None
    return {
        "in_use": int(rows[0]),
        "this_database": int(rows[1]),
        "active": int(rows[2]),
        "max_connections": limit,
        "available": limit - reserved - int(rows[0]),
    }


def collect(settings: Settings, state_file: Path) -> dict[str, Section]:
    procs = guard(lambda: processes(state_file))
    urls = [p["health_url"] for p in procs.get("processes", [])] or _planned_urls(settings)
    metrics = scrape(urls, settings.metrics_token)
    return {
        "queues": guard(lambda: queues(settings)),
        "workers": {"heartbeats": guard(lambda: heartbeats(settings)), **procs},
        "outbox": guard(lambda: outbox_backlog(settings)),
        "postgres": guard(lambda: connections(settings)),
        **domain_sections(settings, metrics),
    }


def domain_sections(settings: Settings, metrics: str | None) -> dict[str, Section]:
    """The sections the domains add (`Domain.status`: a module with `sections(settings,
    metrics)` and `render(report, out)`); a module that fails is one section with an error."""
    from shared.domains import load_target, registered

    found: dict[str, Section] = {}
    for domain in registered():
        if domain.status:
            try:
                found.update(load_target(domain.status).sections(settings, metrics))
            except Exception as exc:
                found[domain.name] = {"error": f"{type(exc).__name__}: {exc}"}
    return found


def _planned_urls(settings: Settings) -> list[str]:
    from shared.launcher.plan import fleet_plan

    return [spec.health_url for spec in fleet_plan(settings)]


# -- the screen ------------------------------------------------------------------------------


def render(report: dict[str, Section]) -> None:
    from rich.table import Table

    from shared.limits import summary as limits_summary

    from .output import cell, out

    q = report["queues"]
    table = Table(title="queues", header_style="bold")
    # The server column once the queues are on several Redis servers (REDIS_QUEUE_URLS).
    sharded = "error" not in q and len({d.get("server") for d in q.values()}) > 1
    numbers = ("ready", "running", "delayed", "dead")
    for name in ("queue", *numbers, "limits", "state", *(["redis"] if sharded else [])):
        table.add_column(name, justify="right" if name in numbers else "left")
    if "error" in q:
        out.print(f"[red]queues: {cell(q['error'])}[/red]")
    else:
        for queue, d in q.items():
            dead = f"[red]{d['dead']}[/red]" if d["dead"] else "0"
            pause = d.get("paused")
            state = (
                f"[yellow]PAUSED by {cell(pause['by'])}: {cell(pause['reason'])}[/yellow]"
                if pause
                else "running"
            )
            server = [cell(d["server"])] if sharded else []
            table.add_row(
                queue,
                str(d["ready"]),
                str(d.get("running", 0)),
                str(d["delayed"]),
                dead,
                cell(limits_summary(d)),
                state,
                *server,
            )
        out.print(table)

    w = report["workers"]
    beats = w["heartbeats"]
    line = beats.get("error") or f"{beats['alive']} consumer(s) alive, {beats['stale']} stale"
    out.print(f"[bold]workers[/bold]: {cell(line)}")
    for worker, dead_queues in (beats.get("dead_consumers") or {}).items():
        out.print(
            f"  [red]consumer thread dead[/red] on {cell(worker)}: {cell(', '.join(dead_queues))}"
        )
    if w.get("processes"):
        procs = Table(header_style="bold")
        for name in ("process", "pid", "restarts", "state", "health"):
            procs.add_column(name)
        for p in w["processes"]:
            style = "green" if p["state"] == "ready" else "red"
            procs.add_row(p["name"], cell(p["pid"]), str(p["restarts"]),
                          f"[{style}]{cell(p['state'])}[/{style}]", p["health_url"])  # fmt: skip
        out.print(procs)
    elif "error" not in w:
        out.print(f"  (no launcher state at {cell(w.get('state_file'))}: not started by make run)")

    o = report["outbox"]
    backlog = o.get("error") or (
        f"{o['pending']} pending, {o['failed']} failed"
        + (f", oldest {o['oldest_pending_s']} s" if o["oldest_pending_s"] is not None else "")
    )
    out.print(f"[bold]outbox[/bold]: {cell(backlog)}")
    pg = report.get("postgres", {})
    line = pg.get("error") or (
        f"{pg['in_use']} of max_connections {pg['max_connections']} in use "
        f"({pg['this_database']} on this database, {pg['active']} active; "
        f"{pg['available']} left for clients)"
    )
    style = "red" if "error" not in pg and pg["available"] < 10 else "bold"
    out.print(f"[{style}]postgres connections[/{style}]: {cell(line)}")
    _render_domains(report)


def _render_domains(report: dict[str, Section]) -> None:
    from shared.domains import load_target, registered

    from .output import cell, out

    for domain in registered():
        if not domain.status:
            continue
        try:
            load_target(domain.status).render(report, out)
        except Exception as exc:
            out.print(f"[red]{cell(domain.name)}: {cell(type(exc).__name__)}: {cell(exc)}[/red]")


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    var_dir: Annotated[
        str | None,
        typer.Option("--var-dir", help="Where `make run` keeps its state (default: $VAR_DIR)."),
    ] = None,
) -> None:
    """Queues, workers alive, outbox backlog, and each domain's own sections."""
    settings = get_settings()
    state_file = Path(var_dir or settings.var_dir) / "run" / "fleet.json"
    report = collect(settings, state_file)
    if as_json:
        output.print_json(report)
    else:
        render(report)
    failed = unreadable(report)
    if failed:
        # Every section is still shown; the exit code tells a script that one is missing.
        output.note(f"could not read: {', '.join(failed)}")
        raise typer.Exit(1)


def unreadable(report: dict[str, Section]) -> list[str]:
    """The sections (dotted paths) that hold an error instead of figures."""
    found: list[str] = []

    def walk(section: Any, path: str) -> None:
        if isinstance(section, dict):
            if "error" in section and isinstance(section["error"], str):
                found.append(path)
                return
            for key, value in section.items():
                if isinstance(value, dict):
                    walk(value, f"{path}.{key}")

    for name, section in report.items():
        walk(section, name)
    return found
