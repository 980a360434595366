"""The scheduler's upkeep steps (shared/maintenance.py) on real Postgres and Redis."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from shared import maintenance
from shared.broker import dedup_key
from shared.jobs import runs
from tests.support.jobs import ECHO
from tests.support.queues import queued
from tests.support.wait import wait_for


def _echo(org: uuid.UUID, text: str) -> dict[str, str]:
    return {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": text}


def _age(db, job_id: str, **columns: datetime) -> None:
    sets = ", ".join(f"{name} = %s" for name in columns)
    db.execute(f"UPDATE job_runs SET {sets} WHERE job_id = %s", (*columns.values(), job_id))


def test_purge_deletes_finished_runs_past_retention_and_keeps_dead_ones(runtime, db) -> None:
    org = uuid.uuid4()
    old, recent, dead = (ECHO.send(_echo(org, t)).job_id for t in ("old", "recent", "dead"))
    assert runtime.sender.flush(5)
    now = datetime.now(UTC)
    long_ago = now - timedelta(days=runtime.settings.run_retention_days + 1)
    # Written long ago (its day has no partition: the default one holds it), finished then.
    db.execute(
        "UPDATE job_runs SET status = 'COMPLETED', finished_at = %s, created_on = %s "
        "WHERE job_id = %s",
        (long_ago, long_ago.date(), old),
    )
    db.execute(
        "UPDATE job_runs SET status = 'COMPLETED', finished_at = %s WHERE job_id = %s",
        (now, recent),
    )
    db.execute(
        "UPDATE job_runs SET status = 'DEAD', finished_at = %s, created_on = %s WHERE job_id = %s",
        (long_ago, long_ago.date(), dead),
    )

    assert maintenance.purge_finished(runtime, now=now) == 1
    assert runs.find(old, org_id=org) is None
    assert runs.find(recent, org_id=org) is not None
    assert runs.find(dead, org_id=org) is not None


def test_dlq_report_flags_queues_over_the_threshold(runtime, db) -> None:
    org = uuid.uuid4()
    ids = [ECHO.send(_echo(org, f"d{i}")).job_id for i in range(3)]
    assert runtime.sender.flush(5)
    db.execute("UPDATE job_runs SET status = 'DEAD' WHERE job_id = ANY(%s)", (ids,))
    report = maintenance.dlq_report(runtime, threshold=2)
    assert report.dead_by_queue == {"testq": 3}
    assert report.over_threshold == ["testq"]
    assert maintenance.dlq_report(runtime, threshold=3).over_threshold == []


def test_a_message_lost_with_redis_is_enqueued_again_and_runs_once(runtime, fleet, db) -> None:
    # Given a run whose message (and job-id key) Redis lost, e.g. restarted without persistence
    fleet.worker.pause()
    org = uuid.uuid4()
    sent = ECHO.send(_echo(org, "lost"))
    assert fleet.runtime.sender.flush(5)  # the fleet's runtime is the one `send` went through
    ns = runtime.settings.broker_namespace
    client = runtime.broker.client
    for key in client.scan_iter(f"{ns}:*"):
        client.delete(key)
    now = datetime.now(UTC)
    _age(db, sent.job_id, queued_at=now - timedelta(minutes=10))
    fleet.worker.resume()

    # When maintenance looks for lost messages (twice, as two scheduler replicas would)
    recovered = maintenance.recover_lost(runtime, now=now)
    again = maintenance.recover_lost(runtime, now=now)

    # Then the job is enqueued once more under its id and completes
    assert recovered == [sent.job_id] and again == []
    assert client.exists(dedup_key(ns, sent.job_id))
    run = wait_for(
        lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "COMPLETED" and r
    )
    assert run.result == {"echo": "lost", "attempt": 1}


def test_a_queued_run_whose_message_is_still_in_redis_is_left_alone(runtime, db) -> None:
    sent = ECHO.send(_echo(uuid.uuid4(), "waiting"))
    assert runtime.sender.flush(5)
    now = datetime.now(UTC)
    _age(db, sent.job_id, queued_at=now - timedelta(hours=1))
    assert maintenance.recover_lost(runtime, now=now) == []
    assert queued(runtime.broker.client, runtime.settings.broker_namespace, "testq") == 1


def test_a_run_stuck_past_its_time_limit_is_flagged_and_redelivered(runtime, fleet, db) -> None:
    org = uuid.uuid4()
    sent = ECHO.send(_echo(org, "stuck"))
    wait_for(lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "COMPLETED")
    # Pretend a worker took it and vanished long ago (RUNNING, started before its time limit,
    # no lease: a run from before leases) and Redis lost its message (its job-id key is gone).
    now = datetime.now(UTC)
    started = now - timedelta(milliseconds=runtime.settings.default_time_limit_ms, minutes=5)
    db.execute(
        "UPDATE job_runs SET status = 'RUNNING', started_at = %s, lease_until = NULL "
        "WHERE job_id = %s",
        (started, sent.job_id),
    )
    runtime.broker.client.delete(dedup_key(runtime.settings.broker_namespace, sent.job_id))

    fleet.worker.pause()
    assert maintenance.redeliver_stuck(runtime, now=now) == [sent.job_id]
    assert maintenance.redeliver_stuck(runtime, now=now) == []

    flagged = runs.find(sent.job_id, org_id=org)
    assert flagged is not None and (flagged.status, flagged.error_code) == ("QUEUED", "STUCK")
    # Claimed through the gate: one message, and a second pass (or recover_lost) adds none
    assert runtime.broker.client.exists(dedup_key(runtime.settings.broker_namespace, sent.job_id))
    assert maintenance.recover_lost(runtime, now=now) == []
    fleet.worker.resume()
    wait_for(lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "COMPLETED")


def test_purge_deletes_published_and_canceled_outbox_events_past_retention(runtime, db) -> None:
    """The outbox kept every event for ever (one row per staged job)."""
    from shared import outbox
    from shared.jobs import catalog

    now = datetime.now(UTC)
    long_ago = now - timedelta(days=runtime.settings.run_retention_days + 1)
    with runtime.sessions() as session, session.begin():
        for _ in range(4):
            outbox.enqueue(
                session,
                catalog.EMAIL_SEND,
                {
                    "org_id": str(uuid.uuid4()),
                    "entity_id": str(uuid.uuid4()),
                    "template_key": "welcome",
                    "recipient_email": "ada@example.com",
                },
            )
    ids = [row[0] for row in db.execute("SELECT id FROM outbox_events ORDER BY id")]
    for event_id, status, created in zip(
        ids,
        ("PUBLISHED", "CANCELED", "FAILED", "PUBLISHED"),
        (long_ago, long_ago, long_ago, now),
        strict=True,
    ):
        db.execute(
            "UPDATE outbox_events SET status = %s, created_at = %s WHERE id = %s",
            (status, created, event_id),
        )

    maintenance.purge_finished(runtime, now=now)

    left = db.execute("SELECT status, created_at = %s FROM outbox_events", (now,)).fetchall()
    assert sorted(left) == [("FAILED", False), ("PUBLISHED", True)]  # FAILED stays to be seen


def test_a_published_run_still_staged_whose_message_redis_lost_is_enqueued_again(
    runtime, fleet, db
) -> None:
    """Published (the relay recorded its message id) but its QUEUED row not yet written when
    Redis lost the message: the run stayed STAGED for good."""
    org = uuid.uuid4()
    sent = ECHO.send(_echo(org, "lost while staged"))
    wait_for(lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "COMPLETED")
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    db.execute(
        "UPDATE job_runs SET status = 'STAGED', result = NULL, finished_at = NULL, queued_at = %s "
        "WHERE job_id = %s",
        (long_ago, sent.job_id),
    )
    runtime.broker.client.delete(dedup_key(runtime.settings.broker_namespace, sent.job_id))

    assert maintenance.recover_lost(runtime, now=datetime.now(UTC)) == [sent.job_id]
    wait_for(lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "COMPLETED")
