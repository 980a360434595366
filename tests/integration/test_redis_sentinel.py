"""Redis behind Sentinels (REDIS_SENTINELS): the primary dies mid-drain, the replica is promoted.

A primary, its replica and three Sentinels on loopback (tests/support/sentinel.py). 4,000 jobs
are sent and two worker processes drain them; once 800 are COMPLETED the primary is SIGKILLed
and the producer sends 1,000 more: it gets a clear error (BrokerUnavailable) until the
Sentinels promote the replica, then its sends go through without a restart; the workers carry
on by themselves. What the asynchronous replica had not received is lost with the primary:
maintenance (`recover_lost`) enqueues those jobs again from their QUEUED rows. At the end every
job has exactly one COMPLETED run; executions beyond one per job are counted (docs/scaling.md).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared import maintenance
from shared.config import Settings
from shared.errors import BrokerUnavailable
from shared.runtime import Runtime, set_runtime
from tests.support.jobs import ECHO
from tests.support.procs import Proc, Procs, free_port
from tests.support.sentinel import SentinelGroup
from tests.support.wait import wait_for

FIRST, AFTER = 4_000, 1_000


def _completed(db, org: uuid.UUID) -> int:
    row = db.execute(
        "SELECT count(*) FROM job_runs WHERE org_id = %s AND status = 'COMPLETED'", (org,)
    ).fetchone()
    return int(row[0])


def _by_status(db, org: uuid.UUID) -> dict[str, int]:
    rows = db.execute(
        "SELECT status, count(*) FROM job_runs WHERE org_id = %s GROUP BY status", (org,)
    ).fetchall()
    return {status: int(n) for status, n in rows}


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _relayed_since(runtime: Runtime, key: str, since: float) -> bool:
    """The scheduler's outbox relay recorded a pass that started after `since` (epoch s)."""
    raw = runtime.broker.client.hget(key, "outbox-relay")  # type: ignore[attr-defined]
    if not raw:
        return False
    entry = json.loads(raw)
    return bool(datetime.fromisoformat(entry["at"]).timestamp() > since)


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_a_failover_mid_drain_loses_no_job(
    runtime, settings: Settings, procs: Procs, db, tmp_path: Path
) -> None:
    (tmp_path / "sentinel").mkdir()
    group = SentinelGroup(tmp_path / "sentinel", master="fleet")
    procs.started.append(group)  # type: ignore[arg-type]  # closed with the test's processes
    ha = {
        "REDIS_URL": "redis://fleet-master/0",  # host and port come from the Sentinels
        "REDIS_SENTINELS": group.sentinels_spec,
        "REDIS_SENTINEL_MASTER": "fleet",
    }
    producer = Runtime(
        settings.model_copy(
            update={
                "redis_url": ha["REDIS_URL"],
                "redis_sentinels": ha["REDIS_SENTINELS"],
                "redis_sentinel_master": "fleet",
            }
        )
    )
    previous = set_runtime(producer)
    org = uuid.uuid4()

    def payload(n: int) -> dict[str, str]:
        return {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": f"job {n}"}

    try:
        sent = [ECHO.send(payload(n)).job_id for n in range(FIRST)]
        assert producer.settle(30)
        health = free_port()
        scheduler = Proc(
            [sys.executable, "-m", "scheduler"],
            env=procs.env({**ha, "HEALTH_PORT": str(health), "OUTBOX_RELAY_INTERVAL_MS": "300"}),
            log_path=procs.tmp / "ha-scheduler.log",
        )
        procs.started.append(scheduler)
        for index in range(2):
            procs.worker(threads=8, env=ha, name=f"ha-worker{index}")
        wait_for(lambda: _completed(db, org) >= 800, timeout=60, what="800 COMPLETED")

        runs_key = f"{settings.broker_namespace}:jobfleet:schedule:runs"
        wait_for(lambda: _relayed_since(producer, runs_key, 0), timeout=60, what="scheduler runs")
        lag = group.replication_lag()  # bytes the replica had not acknowledged
        group.kill_primary()
        killed, killed_at = time.monotonic(), time.time()
        errors: list[str] = []
        for n in range(FIRST, FIRST + AFTER):
            while True:
                try:
                    sent.append(ECHO.send(payload(n)).job_id)
                    break
                except BrokerUnavailable as exc:  # the switch: said clearly, then it recovers
                    errors.append(str(exc))
                    assert time.monotonic() - killed < 30, errors[-1]
                    time.sleep(0.1)
        switch_s = time.monotonic() - killed
        group.wait_promoted(timeout=5)  # the sends went through: the replica is the master
        assert errors and all("cannot enqueue" in e for e in errors), errors[:3]
        assert producer.settle(30)

        recovered: list[str] = []

        def drained() -> bool:
            if _completed(db, org) >= FIRST + AFTER:
                return True
            now = datetime.now(UTC)
            recovered.extend(maintenance.recover_lost(producer, now=now, older_than_s=3))
            time.sleep(0.5)
            return False

        try:
            wait_for(drained, timeout=90, interval=0.5, what=f"{FIRST + AFTER} COMPLETED")
        except AssertionError as exc:  # say where the others are
            raise AssertionError(f"{exc}; runs by status: {_by_status(db, org)}") from None
        # The scheduler, never restarted, records its passes on the promoted master.
        wait_for(
            lambda: _relayed_since(producer, runs_key, killed_at),
            timeout=30,
            what=f"a scheduler pass after the failover:\n{scheduler.log()[-2000:]}",
        )
        assert scheduler.alive()
        wait_for(
            lambda: _status(f"http://127.0.0.1:{health}/health/ready") == 200,
            timeout=20,
            what="the scheduler ready (its Redis check on the promoted master)",
        )
    finally:
        set_runtime(previous)
        producer.close()

    assert _by_status(db, org) == {"COMPLETED": FIRST + AFTER}  # one run per job id, each done
    assert len(set(sent)) == FIRST + AFTER
    ran = [line.split()[1] for line in procs.mark_lines() if line.startswith("echo ")]
    assert set(ran) == set(sent)  # every job ran, none lost
    duplicates = len(ran) - len(set(ran))
    print(
        f"\nfailover: sends failed for {switch_s:.1f} s ({len(errors)} errors), "
        f"{len(recovered)} jobs lost with the primary and recovered by maintenance, "
        f"{duplicates} executions beyond one per job; replica {lag} bytes behind at the kill"
    )
