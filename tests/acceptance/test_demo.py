"""A newcomer's first contact, end to end: `fleet run` in an empty directory brings the fleet up
(this session's Postgres and Redis; the SMTP sink, anvil with the contracts and the local
storage embedded), `fleet demo --small` sends its workload through every worker and the
scheduler, every run settles COMPLETED, `fleet status` sees the fleet, and SIGTERM stops it all
with exit code 0."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.jobs import catalog
from shared.launcher.plan import extra_names, names
from shared.runtime import Runtime
from tests.support.env import test_env
from tests.support.wait import wait_for
from tests.workers.ai.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

FLEET = str(Path(sys.executable).with_name("fleet"))


def free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_block(size: int) -> int:
    """The first of `size` consecutive free ports (the launcher numbers its processes from it)."""
    for _ in range(200):
        base = random.randrange(20_000, 40_000)
        if all(free(base + i) for i in range(size)):
            return base
    raise RuntimeError("no block of free ports")


@pytest.fixture
def fake_ai() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def fleet_env(runtime: Runtime, tmp_path: Path, fake_ai: FakeOpenAI) -> dict[str, str]:
    base = free_block(12)
    ns = test_env()["BROKER_NAMESPACE"]
    env = {
        **os.environ,
        **test_env(),
        "VAR_DIR": str(tmp_path / "var"),
        "HEALTH_BASE_PORT": str(base),
        "SMTP_PORT": str(base + 6),
        "CHAIN_RPC_URL": f"http://127.0.0.1:{base + 7}",
        # The example product API (make run starts it; the demo sends through it over HTTP).
        "PRODUCT_API_PORT": str(base + 8),
        "PRODUCT_API_URL": f"http://127.0.0.1:{base + 8}",
        "CONSOLE_PORT": str(base + 9),  # the operator console (make run starts it too)
        "EMAIL_INBOUND_PORT": str(base + 10),  # the DSN listener (SMTP) and its /health
        "EMAIL_INBOUND_HEALTH_PORT": str(base + 11),
        "KEEPER_LOCK_KEY": f"{ns}:chain:keeper-lock",
        # Brisker periodic jobs than production's, so that the round ends within the test.
        "KEEPER_INTERVAL_MS": "1000",
        "INDEXER_INTERVAL_MS": "500",
        # The chat half of the AI scenario needs an OpenAI-compatible API: the tests' loopback one.
        "AI_BASE_URL": fake_ai.url,
        "COLUMNS": "160",
    }
    env.pop("CHAIN_KEKS", None)
    env.pop("FLEET_DEBUG", None)
    return env


def test_make_run_then_demo_settles_every_job_completed_and_sigterm_exits_0(
    fleet_env: dict[str, str], tmp_path: Path, db: Any
) -> None:
    out = tmp_path / "fleet-run.log"
    with out.open("wb") as log:
        launcher = subprocess.Popen(
            [FLEET, "run", "--var-dir", fleet_env["VAR_DIR"]],
            env=fleet_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: "Ctrl-C stops the fleet" in out.read_text() or launcher.poll() is not None,
            timeout=90,
            interval=0.2,
            what="the fleet's readiness table",
        )
        assert launcher.poll() is None, out.read_text()
        assert out.read_text().count(" ready") >= 6, out.read_text()

        demo = subprocess.run(
            [FLEET, "demo", "--small", "--timeout", "90"],
            env=fleet_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        shown = f"{demo.stdout}\n{demo.stderr}\n--- fleet run ---\n{out.read_text()}"
        assert demo.returncode == 0, shown
        assert "skipped" not in demo.stderr + demo.stdout, shown

        runs = db.execute("SELECT queue, job_name, status FROM job_runs").fetchall()
        assert runs and {status for _, _, status in runs} == {"COMPLETED"}, runs
        assert {queue for queue, _, _ in runs} == set(catalog.QUEUES)  # every worker worked
        jobs = {name for _, name, _ in runs}
        for name in ("email:send", "ai:run", "export:build", "doc:ocr", "chain:claim_prize"):
            assert name in jobs
        assert db.execute(
            "SELECT count(*) FROM ai_tasks WHERE status = 'SUCCEEDED'"
        ).fetchone() == (2,)
        # 2 welcome-sequence steps and a sign-in code, and the sign-in code sent over HTTP.
        assert len(list((Path(fleet_env["VAR_DIR"]) / "mail").glob("*.eml"))) == 4
        assert "over HTTP (http://127.0.0.1:" in demo.stdout and "signed link" in demo.stdout, shown

        status = subprocess.run(
            [FLEET, "status", "--json", "--var-dir", fleet_env["VAR_DIR"]],
            env=fleet_env, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        states = {p["name"]: p["state"] for p in report["workers"]["processes"]}
        # + the example API, the operator console and the email inbound listener
        assert states == {name: "ready" for name in (*names(), *extra_names())}
        assert report["workers"]["heartbeats"]["alive"] >= 5
        assert report["outbox"]["pending"] == 0
        assert report["scheduler"]["runs"]["lottery-keeper"]["ok"] >= 1
        assert report["queues"]["email"]["dead"] == 0

        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 0, out.read_text()
        assert "fleet stopped" in out.read_text()
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
