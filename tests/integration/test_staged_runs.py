"""A job born in the producer's transaction (issue 30): its run is written with its outbox event,
known from the commit on, never published before the commit, gone with a rollback; `via="send"`
(`at_commit`) publishes right after the commit; a STAGED run can be canceled before publication;
a staged job can be delayed. Real Postgres, real Redis, a real worker."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import text

from shared import outbox
from shared.jobs import catalog, runs
from shared.runtime import Runtime
from tests.conftest import FleetWorker
from tests.support.jobs import ECHO
from tests.support.wait import wait_for


@pytest.fixture(autouse=True)
def echo_in_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay publishes by catalog name: let it know the test job."""
    monkeypatch.setitem(catalog.BY_NAME, ECHO.name, ECHO)


def echo(org: uuid.UUID, message: str) -> dict[str, Any]:
    return {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": message}


def run_row(db: psycopg.Connection[Any], job_id: str) -> tuple[Any, ...] | None:
    return db.execute(
        "SELECT status, message_id, version FROM job_runs WHERE job_id = %s", (job_id,)
    ).fetchone()


def echo_messages(runtime: Runtime) -> int:
    return int(runtime.broker.client.hlen(f"{runtime.settings.broker_namespace}:testq.msgs"))


def test_the_run_is_written_in_the_transaction_and_known_from_its_commit(
    runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    with runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "hi")).job_id
        session.flush()
        assert run_row(db, job_id) is None  # another connection: not committed yet
    run = runs.find(job_id, org_id=org)
    assert run is not None and run.status == "STAGED" and run.job_name == ECHO.name
    assert echo_messages(runtime) == 0  # nothing published before the relay (or at_commit)


def test_a_rollback_leaves_no_run_no_event_and_no_message(
    runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    with pytest.raises(RuntimeError), runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "never"), at_commit=True).job_id
        raise RuntimeError("the product's own write failed")
    assert run_row(db, job_id) is None
    assert db.execute("SELECT count(*) FROM outbox_events").fetchone() == (0,)
    assert echo_messages(runtime) == 0


def test_the_relay_moves_a_staged_run_to_queued_and_a_worker_completes_it(
    fleet: FleetWorker, runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    with runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "relayed")).job_id
    assert outbox.relay_once(runtime, now=datetime.now(UTC)).published == 1
    status, message_id, _ = run_row(db, job_id) or ()
    assert status in ("STAGED", "QUEUED", "RUNNING", "COMPLETED") and message_id is not None
    run = wait_for(lambda: (r := runs.find(job_id, org_id=org)) and r.status == "COMPLETED" and r)
    assert run.result == {"echo": "relayed", "attempt": 1} and run.message_id == message_id


def test_at_commit_publishes_right_after_the_commit_without_the_relay(
    fleet: FleetWorker, runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    with runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "now"), at_commit=True).job_id
        session.flush()
        time.sleep(0.3)  # a worker is running: it must still not see the job
        assert run_row(db, job_id) is None and echo_messages(runtime) == 0
    (status,) = db.execute("SELECT status FROM outbox_events").fetchone() or ()
    assert status == "PUBLISHED"  # by this process, at the commit
    run = wait_for(lambda: (r := runs.find(job_id, org_id=org)) and r.status == "COMPLETED" and r)
    assert run.result["echo"] == "now"
    assert outbox.relay_once(runtime, now=datetime.now(UTC)).claimed == 0


def test_at_commit_with_redis_down_keeps_the_commit_and_leaves_the_job_to_the_relay(
    runtime: Runtime, db: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    org = uuid.uuid4()

    def down(*args: Any, **kwargs: Any) -> Any:
        from shared.errors import BrokerUnavailable

        raise BrokerUnavailable("Redis is down")

    monkeypatch.setattr(runtime.sender, "send", down)
    with runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "later"), at_commit=True).job_id
    assert (run_row(db, job_id) or ())[0] == "STAGED"
    ((status, attempts),) = db.execute("SELECT status, attempts FROM outbox_events").fetchall()
    assert (status, attempts) == ("PENDING", 1)  # retried by the relay on its schedule
    monkeypatch.undo()
    monkeypatch.setitem(catalog.BY_NAME, ECHO.name, ECHO)
    later = datetime.now(UTC) + timedelta(minutes=10)
    assert outbox.relay_once(runtime, now=later).published == 1
    assert runs.find(job_id, org_id=org).status == "QUEUED"  # type: ignore[union-attr]


def test_a_staged_run_canceled_before_publication_is_never_published(
    runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    with runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "cancel me")).job_id
    assert runs.cancel(job_id, org_id=org) == "CANCELED"
    assert db.execute("SELECT status FROM outbox_events").fetchone() == ("CANCELED",)
    assert outbox.relay_once(runtime, now=datetime.now(UTC)).claimed == 0
    assert (run_row(db, job_id) or ())[0] == "CANCELED" and echo_messages(runtime) == 0


def test_a_run_canceled_just_after_publication_skips_the_published_message(
    fleet: FleetWorker, runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    fleet.stop()  # the message waits in Redis
    with runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "too late")).job_id
    assert outbox.relay_once(runtime, now=datetime.now(UTC)).published == 1
    assert runs.cancel(job_id, org_id=org) == "CANCELED"
    runtime.settle()  # the QUEUED row of the publication lands after the cancel
    assert (run_row(db, job_id) or ())[0] == "CANCELED"


def test_a_staged_job_with_a_delay_is_published_at_once_and_runs_when_due(
    fleet: FleetWorker, runtime: Runtime
) -> None:
    org = uuid.uuid4()
    with runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "later"), delay_ms=1500).job_id
    sent = time.monotonic()
    assert outbox.relay_once(runtime, now=datetime.now(UTC)).published == 1
    run = wait_for(
        lambda: (r := runs.find(job_id, org_id=org)) and r.status == "COMPLETED" and r, timeout=15
    )
    assert time.monotonic() - sent >= 1.2 and run.started_at is not None
    with pytest.raises(ValueError, match="timezone-aware"), runtime.sessions() as session:
        outbox.enqueue(session, ECHO, echo(org, "x"), scheduled_at=datetime(2030, 1, 1))


def test_a_run_version_grows_with_every_write(
    fleet: FleetWorker, runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    with runtime.sessions() as session, session.begin():
        job_id = outbox.enqueue(session, ECHO, echo(org, "versions"), at_commit=True).job_id
    versions = []
    wait_for(
        lambda: (
            versions.append((run_row(db, job_id) or (None, None, 0))[2])
            or (run_row(db, job_id) or ())[0] == "COMPLETED"
        )
    )
    assert versions == sorted(versions) and (run_row(db, job_id) or ())[2] >= 3


def test_a_session_without_sqlalchemy_events_is_not_needed_for_the_outbox(runtime: Runtime) -> None:
    """`text()` statements only: the staging works on a plain Session in a plain transaction."""
    with runtime.sessions() as session:
        session.execute(text("SELECT 1"))
        outbox.enqueue(session, ECHO, echo(uuid.uuid4(), "plain"))
        session.commit()
    assert outbox.relay_once(runtime, now=datetime.now(UTC)).published == 1


def test_a_document_job_without_its_document_is_refused_at_send_naming_the_field(
    runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    """doc:* jobs need the stored bytes only the upload writes: sent by name without them, they
    used to dead-letter NOT_FOUND later; now the send (direct or staged) says why at once."""
    from shared.errors import PayloadError

    org, document = uuid.uuid4(), uuid.uuid4()
    payload = {"org_id": str(org), "entity_id": str(document), "file_object_id": str(uuid.uuid4())}
    with pytest.raises(PayloadError) as direct:
        catalog.DOC_INGEST.send(payload)
    assert direct.value.errors[0]["loc"] == ("entity_id",)
    assert "no documents row" in direct.value.errors[0]["msg"]
    with pytest.raises(PayloadError), runtime.sessions() as session, session.begin():
        outbox.enqueue(session, catalog.DOC_INGEST, payload)
    assert db.execute("SELECT count(*) FROM job_runs").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM outbox_events").fetchone() == (0,)
