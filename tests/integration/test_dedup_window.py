"""DEDUP_WINDOW_S bounds the dedup keys' Redis memory (docs/scaling.md): past the window a job id
sent again is enqueued once more, and the worker acknowledges it without running it again."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from shared.broker import dedup_key
from shared.jobs import runs
from shared.runtime import Runtime, set_runtime
from tests.support.jobs import ECHO
from tests.support.queues import queued
from tests.support.wait import wait_for, wait_run


def test_a_job_id_sent_again_after_the_window_runs_once(
    runtime, settings, marks: Path, request: pytest.FixtureRequest
) -> None:
    fleet = request.getfixturevalue("fleet")
    short = Runtime(settings.model_copy(update={"dedup_window_s": 1}))
    previous = set_runtime(short)
    try:
        org = uuid.uuid4()
        payload = {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "once"}
        first = ECHO.send(payload)
        key = dedup_key(settings.broker_namespace, first.job_id)
        client = fleet.broker.client
        assert 0 < client.pttl(key) <= 1000  # the window, not the 30-day retention
        done = wait_run(first.job_id, "COMPLETED", org_id=org)
        wait_for(lambda: not client.exists(key), timeout=5, what="the dedup key expired")

        again = ECHO.send(payload)  # the key is gone: enqueued once more
        assert again.job_id == first.job_id and not again.duplicate
        ns = settings.broker_namespace
        wait_for(
            lambda: queued(client, ns, "testq") == 0 and client.hlen(f"{ns}:testq.msgs") == 0,
            what="the second message acknowledged",
        )
        assert short.settle(5)
    finally:
        set_runtime(previous)
        short.close()
    assert marks.read_text().splitlines() == [f"echo {first.job_id} 1"]  # run once, not twice
    run = runs.find(first.job_id, org_id=org)
    assert run is not None
    assert (run.status, run.attempt, run.finished_at) == ("COMPLETED", 1, done.finished_at)


def test_by_default_a_job_id_stays_taken_a_day_not_the_run_retention(
    runtime: Runtime, settings
) -> None:
    """Sized for producer retries (issue 35): at 100 M jobs/day the keys of 30 days took ~710 GiB."""
    import redis

    assert "DEDUP_WINDOW_S" not in os.environ
    assert settings.run_retention_days == 30
    payload = {"org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()), "message": "a day"}
    sent = ECHO.send(payload)
    client = redis.Redis.from_url(settings.redis_url)
    try:
        ttl_ms = client.pttl(dedup_key(settings.broker_namespace, sent.job_id))
    finally:
        client.close()
    assert 86_400_000 - 60_000 < ttl_ms <= 86_400_000
    assert ECHO.send(payload).duplicate  # within the window: enqueues nothing
