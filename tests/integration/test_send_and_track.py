from __future__ import annotations

import uuid

import pytest

from shared.errors import PayloadError
from shared.jobs import runs
from tests.support.jobs import ECHO
from tests.support.queues import queued
from tests.support.wait import wait_for


def _echo(org: uuid.UUID, text: str, v: int = 2) -> dict[str, object]:
    entity = uuid.uuid5(org, text)
    if v == 1:
        return {"v": 1, "org_id": str(org), "entity_id": str(entity), "text": text}
    return {"v": 2, "org_id": str(org), "entity_id": str(entity), "message": text}


def test_send_records_queued_and_the_worker_completes_it(fleet) -> None:
    org = uuid.uuid4()
    sent = fleet.jobs["echo"].send(_echo(org, "hello"), request_id="req-1")
    assert not sent.duplicate and sent.message_id
    run = wait_for(
        lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "COMPLETED" and r,
        what="COMPLETED",
    )
    assert run.result == {"echo": "hello", "attempt": 1}
    assert run.request_id == "req-1"
    assert run.attempt == 1


def test_duplicate_send_enqueues_nothing(runtime) -> None:
    org = uuid.uuid4()
    first = ECHO.send(_echo(org, "once"))
    second = ECHO.send(_echo(org, "once"))
    assert (
        second.duplicate and second.job_id == first.job_id and second.message_id == first.message_id
    )
    ns = runtime.settings.broker_namespace
    assert queued(runtime.broker.client, ns, "testq") == 1


def test_a_send_after_redis_forgot_its_scripts_enqueues_once(runtime) -> None:
    """The gate calls EVALSHA itself (not through redis-py's `Script`): after a Redis restart
    or failover the script is not loaded, and the send loads it and goes on."""
    org = uuid.uuid4()
    assert not ECHO.send(_echo(org, "before")).duplicate  # the script is loaded, and known
    runtime.broker.client.script_flush()
    first = ECHO.send(_echo(org, "after a restart"))
    second = ECHO.send(_echo(org, "after a restart"))
    assert not first.duplicate and second.duplicate
    ns = runtime.settings.broker_namespace
    assert queued(runtime.broker.client, ns, "testq") == 2


def test_invalid_payload_raises_with_field_paths_before_redis(runtime) -> None:
    org = uuid.uuid4()
    with pytest.raises(PayloadError) as err:
        ECHO.send(
            {"v": 2, "org_id": str(org), "entity_id": "not-a-uuid", "message": "x", "extra": 1}
        )
    locs = {".".join(map(str, e["loc"])) for e in err.value.errors}
    assert {"entity_id", "extra"} <= locs
    assert queued(runtime.broker.client, runtime.settings.broker_namespace, "testq") == 0


def test_old_version_is_upgraded_before_the_handler_sees_it(fleet) -> None:
    org = uuid.uuid4()
    sent = fleet.jobs["echo"].send(_echo(org, "legacy", v=1))
    run = wait_for(
        lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "COMPLETED" and r
    )
    assert run.result["echo"] == "legacy"


def test_another_org_cannot_see_the_run(runtime) -> None:
    org = uuid.uuid4()
    sent = ECHO.send(_echo(org, "mine"))
    assert runtime.sender.flush(5)
    assert runs.find(sent.job_id, org_id=org) is not None
    assert runs.find(sent.job_id, org_id=uuid.uuid4()) is None


def test_retriable_error_retries_then_goes_dead_with_its_error(fleet) -> None:
    org = uuid.uuid4()
    sent = fleet.jobs["echo"].send(_echo(org, "boom"))
    run = wait_for(
        lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "DEAD" and r, timeout=15
    )
    assert run.attempt == 3 and run.error_code == "RUNTIMEERROR"
    assert "attempts exhausted (3/3)" in (run.error or "")


def test_permanent_error_is_dead_at_once(fleet) -> None:
    org = uuid.uuid4()
    sent = fleet.jobs["echo"].send(_echo(org, "permanent"))
    run = wait_for(lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "DEAD" and r)
    assert run.attempt == 1 and run.error_code == "TEST_PERMANENT"


def test_already_done_counts_as_success(fleet) -> None:
    org = uuid.uuid4()
    sent = fleet.jobs["echo"].send(_echo(org, "done-before"))
    run = wait_for(
        lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "COMPLETED" and r
    )
    assert run.result == {"already_done": "it was done earlier"}


def test_a_run_is_visible_and_cancelable_right_after_its_send(runtime) -> None:
    """The QUEUED row is written just after `send` returns; a read or a cancel from the same
    process waits for it instead of answering "no such run"."""
    org = uuid.uuid4()
    sent = ECHO.send(_echo(org, "seen at once"))
    run = runs.find(sent.job_id, org_id=org)
    assert run is not None and run.status == "QUEUED"

    other = ECHO.send(_echo(org, "canceled at once"))
    assert runs.cancel(other.job_id, org_id=org) == "CANCELED"
    assert runs.find(other.job_id, org_id=org).status == "CANCELED"  # type: ignore[union-attr]
