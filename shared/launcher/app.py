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
from . import LaunchError, services_file
from .embedded import Service
from .embedded import evm as embedded_evm
from .embedded import postgres as embedded_postgres
from .embedded import redis as embedded_redis
from .embedded import smtp as embedded_smtp
from .metrics_dir import fresh
from .net import port_free
from .plan import (
    CONSOLE,
    EMAIL_INBOUND,
    PRODUCT_API,
    console_spec,
    email_inbound_spec,
    fleet_plan,
    lookup,
    product_api_spec,
)
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
        fleet_only = [name for name in only if name not in (PRODUCT_API, CONSOLE, EMAIL_INBOUND)]
        plan = fleet_plan(settings, only=fleet_only) if fleet_only or not only else []
        api = product_api_spec(env) if not only or PRODUCT_API in only else None
        if api is not None and not port_free(api.health_port) and PRODUCT_API not in only:
            # An example, not a fleet process: a busy port skips it instead of stopping the fleet.
            say(
                f"example product API not started: port {api.health_port} in use (PRODUCT_API_PORT)"
            )
            api = None
        if api is not None:
            plan.append(api)
        console = console_spec(env) if not only or CONSOLE in only else None
        if console is not None and not port_free(console.health_port) and CONSOLE not in only:
            say(f"operator console not started: port {console.health_port} in use (CONSOLE_PORT)")
            console = None
        if console is not None:
            plan.append(console)
        inbound = email_inbound_spec(env) if not only or EMAIL_INBOUND in only else None
        if inbound is not None and EMAIL_INBOUND not in only:
            smtp_port = int(env.get("EMAIL_INBOUND_PORT") or settings.email_inbound_port)
            busy_ports = [p for p in (inbound.health_port, smtp_port) if not port_free(p)]
            if busy_ports:  # the DSN listener, like the console: a busy port skips it
                say(f"email inbound listener not started: port {busy_ports[0]} in use")
                inbound = None
        if inbound is not None:
            plan.append(inbound)
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
        smtp = embedded_smtp.resolve(settings.smtp_host, settings.smtp_port, var, env=child_env)
        services.append(smtp)
        say(smtp.describe())
        child_env.update(embedded_evm.dev_keys(var, child_env))
        evm = embedded_evm.resolve(settings.chain_rpc_url, var, env=env)
        services.append(evm)
        say(evm.describe())
        child_env["CHAIN_RPC_URL"] = evm.url
        # A `fleet` command in another terminal finds these (`services_file.py`).
        services_file.write(services_json, child_env)
        if evm.embedded:
            say(
                f"reference contracts deployed: {embedded_evm.deploy(child_env, var / 'log' / 'deploy.log')}"
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
    api = next((c.spec for c in supervisor.children if c.spec.name == PRODUCT_API), None)
    if api is not None:
        say(
            f"example product API: {api.health_url}/docs (X-API-Key header; development keys"
            " in docs/producers.md)"
        )
    console = next((c.spec for c in supervisor.children if c.spec.name == CONSOLE), None)
    if console is not None:
        say(f"operator console: {console.health_url}/ (`fleet web`; docs/console.md)")
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
