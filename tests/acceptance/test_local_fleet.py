"""A `fleet` command in a second terminal reaches the fleet `make run` runs here, never the
default URLs silently (the launcher's `var/run/services.json`)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from shared.launcher import services_file
from tests.support.env import test_env
from tests.support.jobs import ECHO

FLEET = Path(sys.executable).with_name("fleet")


def _fleet(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FLEET), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_an_unconfigured_cli_uses_the_running_local_fleets_services_and_says_so(
    runtime: Any, tmp_path: Path
) -> None:
    sent = ECHO.send({"org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()), "message": "x"})
    assert runtime.settle()
    session = test_env()
    var = tmp_path / "var"
    (var / "run").mkdir(parents=True)
    unconfigured = {
        **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")},
        "BROKER_NAMESPACE": session["BROKER_NAMESPACE"],
        "VAR_DIR": str(var),
    }
    launcher = subprocess.Popen(["sleep", "60"])  # stands in for a running `make run`
    try:
        services_file.write(
            services_file.path(var),
            {"REDIS_URL": session["REDIS_URL"], "DATABASE_URL": session["DATABASE_URL"]},
            pid=launcher.pid,
        )
        found = _fleet(unconfigured, tmp_path, "jobs", "list", "--json")
        assert found.returncode == 0, found.stderr
        assert sent.job_id in found.stdout
        assert "using the running local fleet's services" in found.stderr

        # Configured: the environment wins, and nothing is adopted.
        configured = _fleet({**unconfigured, **session}, tmp_path, "jobs", "list", "--json")
        assert "local fleet" not in configured.stderr and sent.job_id in configured.stdout
    finally:
        launcher.kill()
        launcher.wait()
    # The launcher is gone (killed without cleaning up): its services are not used.
    gone = _fleet(unconfigured, tmp_path, "jobs", "list", "--json")
    assert "using the running local fleet's services" not in gone.stderr
    assert sent.job_id not in gone.stdout
    # ... and it says which ones it uses instead (issue 31: before, not a word).
    assert "REDIS_URL=redis://127.0.0.1:6379/0 (the default)" in gone.stderr
