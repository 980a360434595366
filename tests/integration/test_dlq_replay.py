"""A dead job replayed by an operator runs again under its job id, from attempt 1, audited."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from shared import dlq
from shared.errors import RunNotFound
from shared.jobs import runs
from tests.support.queues import queued
from tests.support.wait import wait_for, wait_run


def test_a_replayed_dead_job_runs_again_under_its_id_from_attempt_1_and_is_audited(
    fleet, marks: Path
) -> None:
    org = uuid.uuid4()
    sent = fleet.jobs["echo"].send(
        {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "boom"}
    )
    dead = wait_run(sent.job_id, "DEAD", org_id=org, timeout=15)
    assert dead.attempt == 3 and dead.replay_count == 0
    assert [r.job_id for r in dlq.list_dead(org_id=org)] == [sent.job_id]

    replay = dlq.replay(sent.job_id, org_id=org, by="ops@example.com")
    assert replay.job_id == sent.job_id and replay.message_id != dead.message_id

    def dead_again() -> bool:
        run = runs.find(sent.job_id, org_id=org)
        return run is not None and run.status == "DEAD" and run.replay_count == 1

    wait_for(dead_again, timeout=15, what="the replay run to its end")
    run = runs.find(sent.job_id, org_id=org)
    assert run is not None
    assert (run.attempt, run.replayed_by, run.message_id) == (
        3,
        "ops@example.com",
        replay.message_id,
    )
    assert run.replayed_at is not None and run.replayed_at > dead.finished_at
    executions = marks.read_text().splitlines()
    assert executions == [f"echo {sent.job_id} {n}" for n in (1, 2, 3, 1, 2, 3)]  # attempts reset

    assert dlq.history(sent.job_id, org_id=uuid.uuid4()) == []
    (audit,) = dlq.history(sent.job_id, org_id=org)
    assert (audit["replayed_by"], audit["previous_attempt"], audit["previous_error_code"]) == (
        "ops@example.com",
        3,
        "RUNTIMEERROR",
    )


def test_a_replay_is_scoped_by_org_and_a_run_of_another_org_is_no_run(runtime, db) -> None:
    """Before: `dlq.replay` took no org, so a caller that `runs.find(..., org_id=B)` correctly
    refused could replay org A's job. Now the org is a required keyword (None: operators)."""
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    job_id = f"{org_a}:test:echo:{uuid.uuid4()}:0"
    db.execute(
        "INSERT INTO job_runs (org_id, job_name, job_id, queue, status, payload, attempt,"
        " error_code, queued_at, finished_at) VALUES (%s, 'test:echo', %s, 'testq', 'DEAD',"
        " '{}', 3, 'X', now(), now())",
        (org_a, job_id),
    )
    with pytest.raises(TypeError):
        dlq.replay(job_id, by="ops")  # type: ignore[call-arg]  # no org: not a default
    with pytest.raises(RunNotFound):
        dlq.replay(job_id, org_id=org_b, by="ops", dry_run=True)
    with pytest.raises(RunNotFound):
        dlq.replay(job_id, org_id=org_b, by="ops")
    assert dlq.replay_all(queue="testq", org_id=org_b, by="ops") == []
    assert runs.find(job_id, org_id=org_a).status == "DEAD"  # type: ignore[union-attr]
    assert queued(runtime.broker.client, runtime.settings.broker_namespace, "testq") == 0

    done = dlq.replay(job_id, org_id=org_a, by="ops")
    assert done.job_id == job_id
    assert runs.find(job_id, org_id=org_a).status == "QUEUED"  # type: ignore[union-attr]
