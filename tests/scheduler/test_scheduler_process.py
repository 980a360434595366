"""The scheduler process: its schedule table, health, the outbox relay pass, clean shutdown."""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from scheduler.process import build_scheduler
from scheduler.schedule import SCHEDULE
from scheduler.settings import scheduler_settings
from shared import outbox
from shared.jobs import catalog
from shared.runtime import Runtime
from tests.support.procs import Proc, Procs, free_port, wait_exit
from tests.support.wait import wait_for

NIL = "00000000-0000-0000-0000-000000000000"


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_every_periodic_job_runs_alone_and_coalesces(runtime: Runtime) -> None:
    scheduler = build_scheduler(runtime)
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {p.name for p in SCHEDULE}
    assert "outbox-relay" in jobs
    for job in jobs.values():
        assert job.max_instances == 1 and job.coalesce is True
    assert (
        jobs["outbox-relay"].trigger.interval.total_seconds()
        == scheduler_settings().outbox_relay_interval_ms / 1000
    )


@pytest.mark.slow
def test_scheduler_process_serves_ready_relays_the_outbox_and_exits_0_on_sigterm(
    procs: Procs, runtime: Runtime, db: Any
) -> None:
    port = free_port()
    proc = Proc(
        [sys.executable, "-m", "scheduler"],
        env=procs.env({"HEALTH_PORT": str(port)}),
        log_path=procs.tmp / "scheduler.log",
    )
    procs.started.append(proc)
    base = f"http://127.0.0.1:{port}"
    wait_for(
        lambda: http_status(f"{base}/health/ready") == 200,
        timeout=30,
        what="scheduler /health/ready",
    )
    assert http_status(f"{base}/health/live") == 200

    # Given an event committed to the outbox, the relay pass (every second) publishes it.
    with runtime.sessions.begin() as session:
        event = outbox.enqueue(
            session, catalog.EMAIL_SEQ_RUN_DUE, {"org_id": NIL, "slot": f"t-{uuid.uuid4()}"}
        )
        event_id = event.id
    status = wait_for(
        lambda: (
            (
                row := db.execute(
                    "SELECT status FROM outbox_events WHERE id = %s", (event_id,)
                ).fetchone()
            )
            and row[0] == "PUBLISHED"
            and row[0]
        ),
        timeout=15,
        what="outbox event PUBLISHED by the scheduler",
    )
    assert status == "PUBLISHED"
    # Exactly one message carries the event's job id (the scheduler also sends its own
    # per-minute jobs to the email queue, so the queue length alone says nothing).
    job_id = db.execute("SELECT job_id FROM outbox_events WHERE id = %s", (event_id,)).fetchone()[0]
    ns = runtime.settings.broker_namespace
    messages = runtime.broker.client.hvals(f"{ns}:email.msgs")
    assert sum(json.loads(m)["options"]["job_id"] == job_id for m in messages) == 1

    with urllib.request.urlopen(f"{base}/metrics", timeout=2) as response:
        assert b'jobfleet_scheduler_runs_total{job="outbox-relay",outcome="ok"}' in response.read()

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0, proc.log_path.read_text()[-2000:]
    lines = [json.loads(x) for x in proc.log_path.read_text().splitlines() if x.startswith("{")]
    assert any(line.get("event") == "scheduler.stopped" for line in lines)


@pytest.mark.slow
def test_a_scheduler_whose_evm_node_never_answers_stops_at_once_on_sigterm(
    procs: Procs, runtime: Runtime
) -> None:
    """A node that accepts connections and never answers (a hung RPC provider, a port another
    server took): each chain job waited out the 10 s request timeout to find the chain, one
    after the other, so SIGTERM took 16 s, past a test's 20 s bound on a loaded machine."""
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)
    accepted: list[socket.socket] = []
    threading.Thread(
        target=lambda: accepted.extend(iter(lambda: hung.accept()[0], None)), daemon=True
    ).start()
    port = free_port()
    proc = Proc(
        [sys.executable, "-m", "scheduler"],
        env=procs.env(
            {
                "HEALTH_PORT": str(port),
                "CHAIN_RPC_URL": f"http://127.0.0.1:{hung.getsockname()[1]}",
                "INDEXER_INTERVAL_MS": "500",
                "KEEPER_INTERVAL_MS": "500",
            }
        ),
        log_path=procs.tmp / "scheduler.log",
    )
    procs.started.append(proc)
    try:
        wait_for(lambda: bool(accepted), timeout=30, what="the chain jobs reach the hung node")
        time.sleep(1)  # both chain jobs are waiting on it
        proc.send_signal(signal.SIGTERM)
        code, waited = wait_exit(proc, 30)
    finally:
        hung.close()
    assert code == 0, proc.log()[-2000:]
    assert waited < 5, f"stopped {waited:.1f} s after SIGTERM"
