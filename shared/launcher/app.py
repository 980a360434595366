"""`launch()`: the whole fleet on one machine (`make run`, `fleet run`).

Order: Redis and Postgres (configured or embedded), migrations, a fresh multi-process metrics
directory, then every process of the plan under the supervisor; once they answer
`/health/ready`, a table of processes and where to look. SIGINT/SIGTERM stop everything and
exit 0 (a second Ctrl-C skips the grace period).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from ..config import Settings, get_settings
from ..domains import service_hooks
from . import LaunchError, services_file
from .embedded import Service
from .embedded import postgres as embedded_postgres
from .embedded import redis as embedded_redis
from .metrics_dir import fresh
from .net import port_free
from .plan import ProcessSpec, extra_names, extra_ports, extra_spec, extras, fleet_plan, lookup
from .status import table, wait_ready
from .supervisor import Supervisor


def _say(line: str) -> None:
    _print(f"[fleet] {line}")


def _print(text: str) -> None:
    # The terminal may be gone (a closed pipe after Ctrl-C): stopping must go on regardless.
    with contextlib.suppress(OSError):
        print(text, flush=True)


class _Signals:
    """First SIGINT/SIGTERM: stop. Second: hurry (skip the grace period)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.hurry = threading.Event()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        (self.hurry if self.stop.is_set() else self.stop).set()


def launch(
    settings: Settings | None = None,
    *,
    only: Sequence[str] = (),
    var_dir: str | Path | None = None,
    say: Callable[[str], None] = _say,
    demo: bool = False,
) -> int:
    settings = settings or get_settings()
    var = Path(var_dir or settings.var_dir).resolve()
    for sub in ("log", "run"):
        (var / sub).mkdir(parents=True, exist_ok=True)
    signals = _Signals()
    signals.install()
    services_json = services_file.path(var)
    env = dict(os.environ)
    services: list[Service] = []
    try:
        optional = extra_names()
        fleet_only = [name for name in only if name not in optional]
        plan = fleet_plan(settings, only=fleet_only) if fleet_only or not only else []
        plan.extend(_extras(env, only, say))
        busy = [
            f"{spec.name} {spec.health_port}" for spec in plan if not port_free(spec.health_port)
        ]
        if busy:
            # Never share a port with whatever holds it (another fleet would answer for us).
            raise LaunchError(
                f"health port in use by another process: {', '.join(busy)}"
                " (another fleet running? stop it, or set HEALTH_BASE_PORT)"
            )
        redis = embedded_redis.resolve(settings.redis_url, var, env=env)
        services.append(redis)
        say(redis.describe())
        postgres = embedded_postgres.resolve(settings.database_url, var, env=env)
        services.append(postgres)
        say(postgres.describe())
        from ..db.migrate import upgrade

        upgrade(postgres.url)
        say("database migrated (alembic heads)")
        if signals.stop.is_set():
            return 0
        metrics = fresh(var / "prometheus")
        child_env = {
            **env,
            "REDIS_URL": redis.url,
            "DATABASE_URL": postgres.url,
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
            "VAR_DIR": str(var),
            "PYTHONUNBUFFERED": "1",
        }
        # What the domains need on embedded defaults (local stand-ins for their servers): each hook
        # resolves the configured service or starts one, and adds to `child_env` what the
        # processes need to reach it. With `--only`, those its processes use (`Process.uses`).
        for start in service_hooks([spec.name for spec in plan] if only else None):
            service = start(var, child_env, say)
            services.append(service)
            say(service.describe())
            if signals.stop.is_set():
                return 0
        # A `fleet` command in another terminal finds these (`services_file.py`).
        services_file.write(
            services_json, child_env, variables=[v for s in services for v in s.variables]
        )
        supervisor = Supervisor(
            plan,
            env=child_env,
            log_dir=var / "log",
            grace_s=settings.shutdown_grace_ms / 1000,
            state_file=var / "run" / "fleet.json",
            metrics_dir=metrics,
            say=say,
        )
        supervisor.start_all()
        try:
            say(f"started {len(plan)} processes; waiting for /health/ready ...")
            states = wait_ready(
                supervisor.children,
                timeout=settings.launcher_ready_timeout_s,
                stop=signals.stop,
                tick=supervisor.check,
            )
            demo_proc = None
            if not signals.stop.is_set():
                _print_summary(supervisor, states, var, settings, say)
                say(
                    "another terminal: `fleet ...` finds these services by itself"
                    f" ({services_json}); other tools: "
                    + services_file.shell_exports(services_file.read_live(services_json) or {})
                )
                if demo:
                    demo_proc = _start_demo(child_env, states, say)
                supervisor.run(signals.stop)
            if demo_proc is not None and demo_proc.poll() is None:
                demo_proc.terminate()
            say("stopping: SIGTERM to every process (Ctrl-C again to skip the grace period)")
        finally:
            supervisor.stop_all(hurry=signals.hurry)
        return 0
    except LaunchError as exc:
        say(f"error: {exc}")
        return 1
    finally:
        services_file.remove(services_json)
        for service in reversed(services):
            if service.embedded:
                say(f"stopping embedded {service.name}")
                service.stop()
        say("fleet stopped")


def _extras(
    env: dict[str, str], only: Sequence[str], say: Callable[[str], None]
) -> list[ProcessSpec]:
    """The extras to start (console, example product API, ...): all of them with no `--only`,
    else the named ones. Not fleet processes: one left out by default when its port is busy
    (or its dependencies are not installed) instead of stopping the fleet."""
    chosen = []
    for process in extras():
        if only and process.name not in only:
            continue
        spec = extra_spec(process, env)
        if spec is None:
            continue
        if process.name not in only:
            ports = [spec.health_port, *extra_ports(process, env)]
            busy = [p for p in ports if not port_free(p)]
            if busy:
                say(f"{process.name} not started: port {busy[0]} in use")
                continue
        chosen.append(spec)
    return chosen


def _print_summary(
    supervisor: Supervisor,
    states: dict[str, str],
    var: Path,
    settings: Settings,
    say: Callable[[str], None],
) -> None:
    _print(table(supervisor.children, states))
    first = supervisor.children[0].spec.health_url if supervisor.children else ""
    token = " (Authorization: Bearer $METRICS_TOKEN)" if settings.metrics_token else ""
    say(f"logs: {var / 'log'}/<process>.log   state: {var / 'run' / 'fleet.json'}")
    summaries = {p.name: p.summary for p in extras() if p.summary}
    for child in supervisor.children:
        summary = summaries.get(child.spec.name)
        if summary:
            say(summary.replace("{url}", child.spec.health_url))
    if first:
        say(f"metrics (all processes, aggregated): {first}/metrics{token}")
    say("Ctrl-C stops the fleet")


def _start_demo(
    env: dict[str, str], states: dict[str, str], say: Callable[[str], None]
) -> subprocess.Popen[bytes] | None:
    """`fleet demo` once (`make run DEMO=1`), in the foreground terminal; the fleet keeps
    running after it so that its results can be looked at."""
    not_ready = sorted(name for name, state in states.items() if state != "ready")
    if not_ready:
        say(f"demo not started: not ready: {', '.join(not_ready)}")
        return None
    fleet = Path(sys.executable).with_name("fleet")
    say("running the demo workload (`fleet demo`); the fleet keeps running after it")
    return subprocess.Popen([str(fleet) if fleet.exists() else "fleet", "demo"], env=env)


def exec_process(name: str, settings: Settings | None = None) -> None:
    """Replace this process with one row of the plan (`make run-worker-<x>`, `make run-scheduler`).

    The environment wins over the plan's defaults (e.g. `HEALTH_PORT=9200 make run-worker-ai`).
    """
    spec = lookup(settings or get_settings(), name)
    env = {**spec.env, **os.environ}
    sys.stdout.flush()
    os.execvpe(spec.argv[0], list(spec.argv), env)
