"""Redis restarted mid-run: sends fail clearly while it is down; the worker and the producer
reconnect by themselves (no restart) and no job is lost.

Uses a private `redis-server` (AOF, fsync always): the shared one serves other sessions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from shared.config import Settings
from shared.errors import BrokerUnavailable
from shared.jobs import runs
from shared.runtime import Runtime
from tests.support.jobs import SLEEP
from tests.support.procs import Procs
from tests.support.wait import wait_for, wait_run


@pytest.fixture
def private_redis(procs: Procs):
    return procs.redis()


@pytest.fixture
def producer(settings: Settings, private_redis) -> Iterator[Runtime]:
    rt = Runtime(settings.model_copy(update={"redis_url": private_redis.url}))
    yield rt
    rt.close()


def _sleep(org: uuid.UUID, seconds: float = 0.4) -> dict[str, object]:
    return {"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": seconds}


@pytest.mark.slow
def test_a_redis_restart_loses_no_job_and_everyone_reconnects_by_themselves(
    runtime, procs: Procs, private_redis, producer: Runtime, db
) -> None:
    worker = procs.worker(threads=2, env={"REDIS_URL": private_redis.url})
    (child,) = worker.children()
    org = uuid.uuid4()
    before = [producer.sender.send(SLEEP, _sleep(org)) for _ in range(10)]
    wait_for(lambda: procs.mark_lines(), what="the first job started")

    private_redis.stop()
    t0 = time.monotonic()
    lost = _sleep(org)
    with pytest.raises(BrokerUnavailable):
        producer.sender.send(SLEEP, lost)
    assert time.monotonic() - t0 < 5, "a send must fail fast while Redis is down"
    assert db.execute(
        "SELECT count(*) FROM job_runs WHERE payload->>'entity_id' = %s", (lost["entity_id"],)
    ).fetchone() == (0,)
    time.sleep(1.0)  # an outage, not a blip: the worker's fetches and acks fail meanwhile

    restarted = procs.redis(port=private_redis.port)
    restarted_at = time.monotonic()
    for sent in before:
        wait_run(sent.job_id, "COMPLETED", org_id=org, timeout=30)
    after = [producer.sender.send(SLEEP, _sleep(org, 0.05)) for _ in range(3)]
    for sent in after:
        wait_run(sent.job_id, "COMPLETED", org_id=org, timeout=30)
    print(f"\nall jobs done {time.monotonic() - restarted_at:.2f} s after Redis came back")

    assert worker.alive() and worker.children() == [child]  # recovered in place, no restart
    ends = [line.split()[1] for line in procs.mark_lines() if line.startswith("end ")]
    assert sorted(ends) == sorted(s.job_id for s in before + after)  # each ran exactly once
    ns = runtime.settings.broker_namespace
    client = producer.broker.client
    wait_for(lambda: client.hlen(f"{ns}:testq.msgs") == 0, timeout=15, what="every message acked")
    assert restarted.alive()
    assert all(r.attempt == 1 for r in runs.list_runs(org_id=org, limit=20))
