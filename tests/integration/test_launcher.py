"""The launcher (`make run`): its process table, supervision, embedded services, Makefile targets."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.config import Settings
from shared.launcher.embedded.redis import answers as redis_answers
from shared.launcher.net import port_free
from shared.launcher.plan import fleet_plan, names, workers
from shared.launcher.supervisor import BACKOFF_MAX_S, backoff
from tests.support.procs import ROOT, Proc, Procs, free_port
from tests.support.wait import wait_for

NAMES = names()
WORKERS = [(p.name, p.module) for p in workers()]


def http_get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {token}"} if token else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def scheduler_base_port() -> int:
    """A base port whose scheduler row (base + number of workers) is free."""
    for _ in range(50):
        port = free_port()
        if port - len(WORKERS) > 1024:
            return port - len(WORKERS)
    raise AssertionError("no free port")


@pytest.fixture
def var_dir() -> Iterator[Path]:
    # Outside pytest's 0700 tmp tree: as root, the embedded Postgres runs as another user and
    # must be able to reach its data directory.
    with tempfile.TemporaryDirectory(prefix="jobfleet-launch-") as path:
        yield Path(path)


def launcher(
    procs: Procs, var_dir: Path, base_port: int, env: dict[str, str] | None = None
) -> Proc:
    argv = [
        sys.executable,
        "-m",
        "shared.launcher",
        "run",
        "--only",
        "scheduler",
        "--var-dir",
        str(var_dir),
    ]
    extra = {"HEALTH_BASE_PORT": str(base_port), "SHUTDOWN_GRACE_MS": "5000", **(env or {})}
    proc = Proc(argv, env=procs.env(extra), log_path=procs.tmp / "launcher.log")
    procs.started.append(proc)
    return proc


def ready(proc: Proc, url: str) -> bool:
    assert proc.alive(), (
        f"launcher exited ({proc.popen.returncode}):\n{proc.log_path.read_text()[-3000:]}"
    )
    return http_get(url)[0] == 200


def fleet_state(var_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((var_dir / "run" / "fleet.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


# -- the table ---------------------------------------------------------------------------------


def test_plan_runs_five_workers_and_the_scheduler_on_distinct_health_ports() -> None:
    settings = Settings(health_base_port=9500, shutdown_grace_ms=7000, worker_idle_timeout_ms=40)
    plan = fleet_plan(settings)
    assert [p.name for p in plan] == list(NAMES)
    assert len({p.health_port for p in plan}) == len(plan) == 6
    email = plan[0]
    # The email worker's registration asks for 16 threads; the others run 8.
    assert email.argv[1:] == (
        "workers.email.app", "--processes", "1", "--threads", "16", "--skip-logging",
        "--worker-shutdown-timeout", "7000",
    )  # fmt: skip
    assert plan[1].argv[1:6] == ("workers.ai.app", "--processes", "1", "--threads", "8")
    assert email.env == {"HEALTH_PORT": "9500", "dramatiq_worker_timeout": "40"}
    assert plan[-1].argv[1:] == ("-m", "scheduler")
    assert [p.name for p in fleet_plan(settings, only=["scheduler"])] == ["scheduler"]
    with pytest.raises(ValueError):
        fleet_plan(settings, only=["worker-nope"])


def test_restart_backoff_doubles_and_is_capped() -> None:
    assert [backoff(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff(50) == BACKOFF_MAX_S


# -- supervision -------------------------------------------------------------------------------


@pytest.mark.slow
def test_supervisor_restarts_a_child_killed_with_sigkill_and_stops_everything_on_sigterm(
    procs: Procs, var_dir: Path
) -> None:
    base = scheduler_base_port()
    proc = launcher(procs, var_dir, base)
    health = f"http://127.0.0.1:{base + len(WORKERS)}/health/ready"
    wait_for(lambda: ready(proc, health), timeout=40, what="scheduler ready under the launcher")
    first = fleet_state(var_dir)["processes"][0]
    assert first["name"] == "scheduler" and first["restarts"] == 0

    # When the child dies by SIGKILL, the supervisor starts a new one.
    import os

    os.kill(first["pid"], signal.SIGKILL)
    second = wait_for(
        lambda: (p := fleet_state(var_dir)["processes"][0])["restarts"] == 1 and p,
        timeout=20,
        what="restart",
    )
    assert second["pid"] != first["pid"] and second["last_exit"] == -signal.SIGKILL
    wait_for(lambda: ready(proc, health), timeout=30, what="restarted scheduler ready")
    assert "restarted as pid" in proc.log_path.read_text()

    # SIGTERM stops the child and the launcher, which exits 0.
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.log_path.read_text()[-3000:]
    assert not alive(second["pid"])
    assert fleet_state(var_dir)["stopped"] is True
    out = proc.log_path.read_text()
    assert "using Redis at" in out and "(from REDIS_URL)" in out and "fleet stopped" in out


@pytest.mark.slow
def test_embedded_redis_and_postgres_start_when_the_urls_point_nowhere(
    procs: Procs, var_dir: Path
) -> None:
    base = scheduler_base_port()
    nowhere = {
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/jobfleet",
    }
    proc = launcher(procs, var_dir, base, nowhere)
    health = f"http://127.0.0.1:{base + len(WORKERS)}/health/ready"
    # Ready means the scheduler reached both embedded servers (and the migrated database).
    wait_for(lambda: ready(proc, health), timeout=60, what="scheduler ready on embedded services")
    out = proc.log_path.read_text()
    assert "started embedded Redis at redis://127.0.0.1:" in out
    assert "started embedded Postgres at postgresql+psycopg://postgres@127.0.0.1:" in out
    redis_url = f"redis://127.0.0.1:{(var_dir / 'redis' / 'port').read_text().strip()}/0"
    pg_port = int((var_dir / "postgres" / "port").read_text())
    assert redis_answers(redis_url)
    assert (var_dir / "redis" / "appendonly.aof").exists()

    # A second terminal: `fleet` with nothing configured finds the fleet's own services (before:
    # the default URLs, another Redis and Postgres, silently); other tools get exports to paste.
    wait_for(lambda: "another terminal" in proc.log_path.read_text(), what="the exports line")
    assert f"export REDIS_URL={redis_url}" in proc.log_path.read_text()
    unconfigured = {k: v for k, v in procs.env().items() if k not in ("REDIS_URL", "DATABASE_URL")}
    second = subprocess.run(
        [str(Path(sys.executable).with_name("fleet")), "jobs", "list", "--json"],
        env={**unconfigured, "VAR_DIR": str(var_dir)},
        cwd=var_dir,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 0, second.stderr
    assert "using the running local fleet's services" in second.stderr
    assert f":{pg_port}/" in second.stderr and redis_url in second.stderr

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(40) == 0, proc.log_path.read_text()[-3000:]
    assert not redis_answers(redis_url)
    assert port_free(pg_port)
    assert not (var_dir / "run" / "services.json").exists()


# -- Makefile targets --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("process", [name for name, _ in WORKERS])
def test_makefile_worker_target_serves_health_and_token_protected_metrics(
    procs: Procs, process: str
) -> None:
    port = free_port()
    env = {"HEALTH_PORT": str(port), "METRICS_TOKEN": "t0ken"}
    proc = Proc(
        ["make", "-s", "-C", str(ROOT), f"run-{process}"],
        env=procs.env(env),
        log_path=procs.tmp / f"{process}.log",
    )
    procs.started.append(proc)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.alive(), proc.log_path.read_text()[-3000:]
        return http_get(f"{base}/health/ready")[0] == 200

    wait_for(ready, timeout=60, what=f"{process} /health/ready")
    assert http_get(f"{base}/health/live")[0] == 200
    assert http_get(f"{base}/metrics")[0] == 401
    assert http_get(f"{base}/metrics", token="wrong")[0] == 401
    status, body = http_get(f"{base}/metrics", token="t0ken")
    assert status == 200 and b"jobfleet_process_up" in body
