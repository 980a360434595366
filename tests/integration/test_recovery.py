"""After Redis loses its data (issue 13): maintenance enqueues one message per run, through the
job-id gate, and the scheduler's recovery pass brings every run back within a minute."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler import upkeep
from shared import maintenance
from shared.jobs import runs
from shared.runtime import Runtime
from tests.support.jobs import ECHO, SLEEP
from tests.support.procs import Procs
from tests.support.queues import queued
from tests.support.wait import wait_for

#: What the issue asks: recovered within 60 s of Redis coming back.
RECOVERY_BUDGET_S = 60.0


def _wipe(runtime: Runtime) -> None:
    """Redis lost its data (a restart without persistence): nothing of this namespace is left."""
    client = runtime.broker.client
    for key in client.scan_iter(f"{runtime.settings.broker_namespace}:*"):
        client.delete(key)


def test_a_maintenance_pass_after_redis_lost_its_data_enqueues_one_message_per_run(
    runtime, db
) -> None:
    org = uuid.uuid4()
    sent = [
        ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": f"m{i}"})
        for i in range(5)
    ]
    assert runtime.sender.flush(5)
    now = datetime.now(UTC)
    long_ago = now - timedelta(hours=1)
    db.execute(
        "UPDATE job_runs SET queued_at = %s WHERE job_id = ANY(%s)",
        (long_ago, [s.job_id for s in sent]),
    )
    # Three were running on a worker that died with them: RUNNING, their lease long over
    running = [s.job_id for s in sent[:3]]
    db.execute(
        "UPDATE job_runs SET status = 'RUNNING', attempt = 1, started_at = %s, "
        "lease_owner = 'gone:1:x', lease_until = %s WHERE job_id = ANY(%s)",
        (long_ago, long_ago, running),
    )
    _wipe(runtime)

    upkeep.maintain(runtime, now)  # redeliver_stuck, then recover_lost, in one pass
    upkeep.maintain(runtime, now)  # and again, as a second scheduler replica would

    ns = runtime.settings.broker_namespace
    client = runtime.broker.client
    assert queued(client, ns, "testq") == 5, "one message per run"
    assert client.hlen(f"{ns}:testq.msgs") == 5
    for job_id in running:
        run = runs.find(job_id, org_id=org)
        assert run is not None and (run.status, run.error_code) == ("QUEUED", "STUCK")


@pytest.mark.slow
def test_after_redis_loses_its_data_every_run_is_back_within_a_minute(
    runtime, procs: Procs, settings
) -> None:
    first = procs.redis(name="redis-a")
    worker = procs.worker(threads=1, env={"REDIS_URL": first.url})
    rt = Runtime(settings.model_copy(update={"redis_url": first.url}))
    stop = threading.Event()

    def scheduler() -> None:  # the scheduler's recovery pass, at its period
        while not stop.wait(maintenance.RECOVERY_INTERVAL_S):
            try:
                upkeep.recover(rt, datetime.now(UTC))
            except Exception:
                continue  # Redis down: the next pass

    pacer = threading.Thread(target=scheduler, daemon=True)
    try:
        pacer.start()
        org = uuid.uuid4()
        sent: list[Any] = [
            rt.sender.send(
                SLEEP, {"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 0.3}
            )
            for _ in range(6)
        ]
        assert rt.sender.flush(5)
        wait_for(lambda: procs.mark_lines(), what="the first job started")

        # Redis dies and comes back empty (no persistence), on the same address
        first.kill_group(signal.SIGKILL)
        first.wait(10)
        procs.redis(port=first.port, name="redis-b")
        back = time.monotonic()

        def all_done() -> bool:
            found = [runs.find(s.job_id, org_id=org, runtime=rt) for s in sent]
            return all(r is not None and r.status == "COMPLETED" for r in found)

        wait_for(all_done, timeout=RECOVERY_BUDGET_S + 30, interval=0.2, what="every run back")
        took = time.monotonic() - back
        print(f"\nrecovered {len(sent)} runs {took:.1f} s after Redis came back empty")
        assert took < RECOVERY_BUDGET_S
        starts = [line for line in procs.mark_lines() if line.startswith("start ")]
        assert sorted(starts) == sorted(f"start {s.job_id} " for s in sent)  # each ran once
        assert worker.alive()
    finally:
        stop.set()
        pacer.join(10)
        rt.close()
