"""Transactional outbox: no commit no job, a commit exactly one job, however many relays run,
and a Redis outage keeps events PENDING on the backoff schedule until they fail with a reason."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from shared import outbox
from shared.config import Settings
from shared.jobs import catalog
from shared.runtime import Runtime
from tests.support.procs import free_port
from tests.support.wait import wait_for


def _email(org: uuid.UUID | None = None) -> dict[str, Any]:
    return {
        "org_id": str(org or uuid.uuid4()),
        "entity_id": str(uuid.uuid4()),
        "template_key": "welcome",
        "recipient_email": "ada@example.com",
    }


def _stage(runtime: Runtime, n: int = 1) -> None:
    with runtime.sessions() as session, session.begin():
        for _ in range(n):
            outbox.enqueue(session, catalog.EMAIL_SEND, _email())


def _email_messages(runtime: Runtime) -> int:
    return int(runtime.broker.client.hlen(f"{runtime.settings.broker_namespace}:email.msgs"))


def _events(db: Any) -> list[tuple[Any, ...]]:
    return db.execute(
        "SELECT status, attempts, next_attempt_at, error FROM outbox_events"
    ).fetchall()


def _runs(db: Any) -> tuple[int, int]:
    row = db.execute("SELECT count(*), count(DISTINCT message_id) FROM job_runs").fetchone()
    return (row[0], row[1])


def _now() -> datetime:
    return datetime.now(UTC)


def test_a_rolled_back_transaction_publishes_nothing(runtime, db) -> None:
    with runtime.sessions() as session, session.begin():
        outbox.enqueue(session, catalog.EMAIL_SEND, _email())
        session.execute(text("SELECT 1"))
        session.rollback()

    assert outbox.relay_once(runtime, now=_now()).claimed == 0
    assert _events(db) == []
    assert _email_messages(runtime) == 0


def test_a_commit_publishes_exactly_one_job_even_when_relayed_twice(runtime, db) -> None:
    _stage(runtime)
    assert outbox.relay_once(runtime, now=_now()).published == 1
    assert outbox.relay_once(runtime, now=_now()).claimed == 0
    # A relay that crashed after publishing but before marking the row: it is published again.
    db.execute("UPDATE outbox_events SET status = 'PENDING', published_at = NULL")
    assert outbox.relay_once(runtime, now=_now()).duplicates == 1

    assert [row[0] for row in _events(db)] == ["PUBLISHED"]
    assert _email_messages(runtime) == 1
    wait_for(lambda: _runs(db) == (1, 1), what="one QUEUED run")


@pytest.fixture
def two_relays(settings: Settings) -> Iterator[list[Runtime]]:
    small_batches = settings.model_copy(update={"outbox_batch": 10})
    relays = [Runtime(small_batches), Runtime(small_batches)]
    yield relays
    for rt in relays:
        rt.close()


def test_two_relays_in_parallel_publish_every_event_once(runtime, db, two_relays) -> None:
    _stage(runtime, 200)
    totals: list[outbox.RelayStats] = []
    start = threading.Barrier(len(two_relays))

    def relay(rt: Runtime, name: str) -> None:
        start.wait()
        while (stats := outbox.relay_once(rt, now=_now(), relay=name)).claimed:
            totals.append(stats)

    threads = [
        threading.Thread(target=relay, args=(rt, f"relay-{i}")) for i, rt in enumerate(two_relays)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert sum(s.published for s in totals) == 200
    assert sum(s.duplicates + s.retried + s.failed for s in totals) == 0
    by_relay = dict(
        db.execute("SELECT locked_by, count(*) FROM outbox_events GROUP BY locked_by").fetchall()
    )
    assert sorted(by_relay) == ["relay-0", "relay-1"]  # both took part
    assert db.execute(
        "SELECT count(*) FROM outbox_events WHERE status = 'PUBLISHED'"
    ).fetchone() == (200,)
    assert _email_messages(runtime) == 200
    wait_for(lambda: _runs(db) == (200, 200), what="200 runs of 200 messages")


@pytest.fixture
def redis_down(settings: Settings) -> Iterator[Runtime]:
    dead = settings.model_copy(
        update={"redis_url": f"redis://127.0.0.1:{free_port()}/0", "outbox_backoff_s": [60, 300]}
    )
    rt = Runtime(dead)
    yield rt
    rt.close()


def test_redis_down_keeps_the_event_pending_on_the_schedule_then_fails_it(
    runtime, db, redis_down
) -> None:
    _stage(runtime)
    now = _now()

    assert outbox.relay_once(redis_down, now=now).retried == 1
    ((status, attempts, next_attempt_at, error),) = _events(db)
    assert (status, attempts, next_attempt_at) == ("PENDING", 1, now + timedelta(seconds=60))
    assert error.startswith("BROKER_UNAVAILABLE")
    assert outbox.relay_once(redis_down, now=now + timedelta(seconds=59)).claimed == 0  # not due

    assert outbox.relay_once(redis_down, now=now + timedelta(seconds=60)).failed == 1
    ((status, attempts, _, error),) = _events(db)
    assert (status, attempts) == ("FAILED", 2)
    assert error.startswith("BROKER_UNAVAILABLE")
    assert _email_messages(runtime) == 0
    # The run staged with the event says it was never published, and why.
    ((run_status, code, run_error),) = db.execute(
        "SELECT status, error_code, error FROM job_runs"
    ).fetchall()
    assert (run_status, code) == ("DEAD", "BROKER_UNAVAILABLE")
    assert run_error.startswith("not published: cannot enqueue")
