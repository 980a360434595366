"""`fleet web` and `make run`'s supervisor serve the console as a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from shared.launcher.plan import CONSOLE as CONSOLE_PROCESS
from shared.runtime import Runtime
from tests.support.env import test_env
from tests.support.procs import Proc, free_port
from tests.support.wait import wait_for

CONSOLE = CONSOLE_PROCESS.name


FLEET = str(Path(sys.executable).with_name("fleet"))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    return {**env, **test_env(), "PYTHONUNBUFFERED": "1", **extra}


def test_fleet_web_refuses_to_listen_off_loopback_without_auth() -> None:
    done = subprocess.run(
        [FLEET, "web", "--host", "0.0.0.0", "--port", str(free_port())],
        env=_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "refusing to serve the console on 0.0.0.0 without auth" in done.stderr


@pytest.mark.slow
def test_fleet_web_serves_the_console_behind_its_token(runtime: Runtime, tmp_path: Path) -> None:
    port = free_port()
    proc = Proc(
        [FLEET, "web", "--port", str(port)],
        env=_env(CONSOLE_TOKEN="web-token"),
        log_path=tmp_path / "web.log",
    )
    try:
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            assert proc.alive(), proc.log()[-3000:]
            try:
                return httpx.get(f"{url}/health/ready", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(ready, timeout=60, interval=0.2, what="fleet web ready")
        assert httpx.get(url).status_code == 401
        page = httpx.get(url, headers={"Authorization": "Bearer web-token"})
        assert page.status_code == 200 and "Queues" in page.text
        assert f"console: http://127.0.0.1:{port}/ (token)" in proc.log()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        proc.close()


@pytest.mark.slow
def test_make_run_supervises_the_console_and_shows_its_url(tmp_path: Path) -> None:
    """The launcher's `--only console` (make run starts it beside the fleet): ready on
    CONSOLE_PORT, its URL in the ready table and the summary, stopped by SIGTERM."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="jobfleet-launch-") as var:  # see test_launcher.py
        launcher = Proc(
            [sys.executable, "-m", "shared.launcher", "run", "--only", CONSOLE, "--var-dir", var],
            env=_env(CONSOLE_PORT=str(port)),
            log_path=tmp_path / "launcher.log",
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(
                lambda: "Ctrl-C stops the fleet" in launcher.log() or not launcher.alive(),
                timeout=90, interval=0.3, what="the ready table",
            )  # fmt: skip
            log = launcher.log()
            assert launcher.alive(), log[-3000:]
            assert any(
                CONSOLE in line and url in line and "ready" in line for line in log.splitlines()
            )
            assert f"operator console: {url}/" in log
            # The console alone uses neither the SMTP sink nor the EVM node: none is started.
            assert "SMTP sink" not in log and "EVM node" not in log, log
            assert httpx.get(f"{url}/").status_code == 200  # loopback, no auth configured
            launcher.send_signal(signal.SIGTERM)
            assert launcher.wait(40) == 0, launcher.log()[-3000:]
        finally:
            launcher.close()
