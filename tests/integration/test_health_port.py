"""One health port, one process: a port a running fleet holds is refused with a clear error.

Before: the socket was bound with SO_REUSEPORT, so a second process (a second `make run`, a
stray worker) bound the port of a running fleet and both answered, at random.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from shared.observability.health import HealthPortInUse, HealthServer
from shared.runtime import Runtime
from tests.support.env import test_env
from tests.support.procs import Procs, free_port
from tests.support.wait import wait_for

FLEET = Path(sys.executable).with_name("fleet")


def _service(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=2) as response:
        return str(json.loads(response.read())["service"])


def test_a_second_server_on_a_held_port_fails_at_start_saying_so() -> None:
    port = free_port()
    first = HealthServer(host="127.0.0.1", port=port, service="first", checks={}).start()
    try:
        with pytest.raises(HealthPortInUse, match="in use by another process"):
            HealthServer(host="127.0.0.1", port=port, service="second", checks={})
        assert {_service(port) for _ in range(20)} == {"first"}
    finally:
        first.stop()


def test_a_worker_given_a_held_port_says_so_and_never_answers_on_it(
    runtime: Runtime, procs: Procs
) -> None:
    port = free_port()
    first = HealthServer(host="127.0.0.1", port=port, service="first", checks={}).start()
    try:
        worker = procs.worker(env={"HEALTH_PORT": str(port)}, ready=False)
        said = wait_for(lambda: worker.events("health.bind_failed"), what="the bind error")
        assert "in use by another process" in said[0]["error"]
        # Not ready, and it says so (before: `worker.ready` right after the bind error).
        not_ready = wait_for(lambda: worker.events("worker.not_ready"), what="worker.not_ready")
        assert "in use by another process" in not_ready[0]["reason"]
        assert worker.events("worker.ready") == []
        assert {_service(port) for _ in range(20)} == {"first"}
    finally:
        first.stop()


def test_fleet_run_refuses_to_start_when_a_health_port_is_held(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        done = subprocess.run(
            [str(FLEET), "run", "--only", "worker-email", "--var-dir", str(tmp_path)],
            env={**os.environ, **test_env(), "HEALTH_BASE_PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"worker-email {port}" in done.stdout and "in use by another process" in done.stdout
