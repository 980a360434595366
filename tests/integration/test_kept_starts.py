"""One durable write per short job (issue 36): a run's start is kept in Redis, on its job id's
key, and reaches `job_runs` with its outcome in one statement; a run that outlives
TRACKING_START_WRITE_AFTER_MS is written RUNNING meanwhile; a worker that dies with a kept start
leaves that execution on the record and counted as an attempt; a cancel sees a kept start.

Every write of `job_runs` is seen through a trigger installed for the test: which statuses the
run store held, in order."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from shared import maintenance
from shared.broker import dedup_key
from shared.jobs import runs
from tests.support.jobs import ECHO, HOLD
from tests.support.procs import Procs
from tests.support.wait import wait_for, wait_run

TRIGGER = """
CREATE TABLE IF NOT EXISTS test_run_writes (
    job_id text, status text, executions int, at timestamptz DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION test_log_run_write() RETURNS trigger AS $$
BEGIN
    INSERT INTO test_run_writes (job_id, status, executions)
    VALUES (NEW.job_id, NEW.status, NEW.executions);
    RETURN NULL;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS test_log_run_write ON job_runs;
CREATE TRIGGER test_log_run_write AFTER INSERT OR UPDATE ON job_runs
    FOR EACH ROW EXECUTE FUNCTION test_log_run_write();
"""


@pytest.fixture
def writes(db) -> Iterator[Any]:
    """Every write of a run from now on: `writes(job_id)` gives its statuses in order."""
    db.execute(TRIGGER)

    def of(job_id: str) -> list[str]:
        rows = db.execute(
            "SELECT status FROM test_run_writes WHERE job_id = %s ORDER BY at", (job_id,)
        ).fetchall()
        return [row[0] for row in rows]

    try:
        yield of
    finally:
        db.execute("DROP TRIGGER IF EXISTS test_log_run_write ON job_runs")


def _executions(db, job_id: str) -> list[tuple[int, int, str, Any]]:
    return db.execute(
        "SELECT execution, attempt, worker, started_at FROM job_executions WHERE job_id = %s "
        "ORDER BY execution",
        (job_id,),
    ).fetchall()


def _key(runtime, job_id: str) -> str:
    value = runtime.broker.client.get(dedup_key(runtime.settings.broker_namespace, job_id))
    return value.decode() if value else ""


def _settled(runtime, *sent: Any) -> None:
    """The QUEUED rows of `sent` written and their keys marked fresh (just after the rows:
    `RunWriter(on_fresh=)`), so that a worker started now keeps their starts."""
    assert runtime.settle(5)
    for s in sent:
        wait_for(
            lambda s=s: _key(runtime, s.job_id).startswith(f"{s.message_id}|fresh|"),
            timeout=5,
            what="the job id's key marked fresh",
        )


def _hold(org: uuid.UUID, seconds: float) -> dict[str, Any]:
    return {"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": seconds}


def test_a_short_job_is_written_once_after_its_queued_row(
    runtime, db, writes, request: pytest.FixtureRequest
) -> None:
    org = uuid.uuid4()
    sent = ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "once"})
    _settled(runtime, sent)
    # Its row inserted new, in today's partition.
    run = runs.find(sent.job_id, org_id=org)
    assert run is not None and run.status == "QUEUED"
    day = db.execute("SELECT created_on FROM job_runs WHERE job_id = %s", (sent.job_id,)).fetchone()
    assert _key(runtime, sent.job_id) == f"{sent.message_id}|fresh|{day[0].isoformat()}"
    request.getfixturevalue("fleet")  # a worker from now on

    run = wait_run(sent.job_id, "COMPLETED", org_id=org)
    # QUEUED by its producer, then one statement: start, execution and outcome together.
    assert writes(sent.job_id) == ["QUEUED", "COMPLETED"]
    assert (run.attempt, run.executions) == (1, 1)
    assert run.started_at is not None and run.finished_at is not None
    assert run.started_at <= run.finished_at
    ((execution, attempt, worker, started_at),) = _executions(db, sent.job_id)
    assert (execution, attempt, started_at) == (1, 1, run.started_at)
    assert _key(runtime, sent.job_id).startswith(f"{sent.message_id}|{worker}|")


def test_a_kept_run_put_back_without_an_attempt_is_started_again_as_attempt_1(
    runtime, db, marks, writes, request: pytest.FixtureRequest
) -> None:
    """`RetryLater`: QUEUED again, the same message back in 200 ms at the same attempt. Its kept
    start must not read as an interrupted execution then (it was deferred for the rest of its
    lease, then taken over as attempt 2, before the key said its start was written)."""
    org = uuid.uuid4()
    sent = ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "later-once"})
    _settled(runtime, sent)
    request.getfixturevalue("fleet")

    run = wait_run(sent.job_id, "COMPLETED", org_id=org, timeout=15)
    assert marks.read_text().splitlines() == [f"echo {sent.job_id} 1"] * 2
    assert (run.attempt, run.executions) == (1, 2)
    assert [(e, a) for e, a, _, _ in _executions(db, sent.job_id)] == [(1, 1), (2, 1)]
    assert writes(sent.job_id)[:2] == ["QUEUED", "QUEUED"]  # its first outcome, in one write


def test_a_job_that_outlives_the_threshold_is_seen_running_while_it_runs(
    runtime, db, writes, request: pytest.FixtureRequest
) -> None:
    after_s = runtime.settings.tracking_start_write_after_ms / 1000
    org = uuid.uuid4()
    sent = HOLD.send(_hold(org, after_s + 4.0))
    _settled(runtime, sent)
    request.getfixturevalue("fleet")

    # Written at most half a threshold after it (plus the write): seen well before it ends.
    running = wait_run(sent.job_id, "RUNNING", org_id=org, timeout=after_s + 3.0)
    assert running.started_at is not None and running.executions == 1
    assert _key(runtime, sent.job_id) == f"{sent.message_id}|written"
    run = wait_run(sent.job_id, "COMPLETED", org_id=org, timeout=15)
    # (Each lease renewal is a write of the RUNNING run too.)
    statuses = writes(sent.job_id)
    assert [s for i, s in enumerate(statuses) if not i or statuses[i - 1] != s] == [
        "QUEUED",
        "RUNNING",
        "COMPLETED",
    ]
    assert (run.attempt, run.executions, run.started_at) == (1, 1, running.started_at)
    assert [(e, a) for e, a, _, _ in _executions(db, sent.job_id)] == [(1, 1)]


def test_a_cancel_while_a_kept_start_runs_is_a_cancel_request(
    runtime, writes, request: pytest.FixtureRequest
) -> None:
    org = uuid.uuid4()
    sent = HOLD.send(_hold(org, 0.8))  # shorter than the threshold: kept until it ends
    _settled(runtime, sent)
    request.getfixturevalue("fleet")
    wait_for(lambda: "|fresh" not in _key(runtime, sent.job_id), what="the start kept")
    assert runs.find(sent.job_id, org_id=org).status == "QUEUED"  # what the store knows

    assert runs.cancel(sent.job_id, org_id=org) == "CANCEL_REQUESTED"
    run = wait_run(sent.job_id, "COMPLETED", org_id=org, timeout=15)
    assert run.cancel_requested  # asked, and the job (which never checks) ran to its end
    assert writes(sent.job_id)[-1] == "COMPLETED"


@pytest.mark.slow  # spawns processes and waits out a heartbeat timeout
def test_a_worker_that_dies_with_a_kept_start_leaves_it_on_the_record_as_an_attempt(
    runtime, db, procs: Procs
) -> None:
    org = uuid.uuid4()
    sent = HOLD.send(_hold(org, 2.0))
    _settled(runtime, sent)
    first = procs.worker(threads=2, name="first")
    wait_for(lambda: f"hold start {sent.job_id}" in "\n".join(procs.mark_lines()), what="started")
    value = _key(runtime, sent.job_id)
    assert value.startswith(f"{sent.message_id}|") and value.count("|") == 4, value
    dead_owner = value.split("|")[1]
    pid = int(dead_owner.split(":")[1])
    assert pid in first.children()
    os.kill(pid, signal.SIGKILL)  # before the threshold: nothing of this start is in Postgres
    assert runs.find(sent.job_id, org_id=org).status == "QUEUED"

    procs.worker(threads=2, name="second")
    run = wait_run(sent.job_id, "COMPLETED", org_id=org, timeout=40)
    executions = _executions(db, sent.job_id)
    # The killed execution is on the record, under its worker, and was an attempt.
    assert [(e, a) for e, a, _, _ in executions] == [(1, 1), (2, 2)]
    assert executions[0][2] == dead_owner and executions[1][2] != dead_owner
    assert (run.attempt, run.executions) == (2, 2)
    assert [line.split()[0:3] for line in procs.mark_lines() if sent.job_id in line].count(
        ["hold", "start", sent.job_id]
    ) == 2


@pytest.mark.slow  # spawns processes
def test_a_shutdown_writes_the_kept_starts_it_hands_back_not_an_attempt(
    runtime, db, procs: Procs
) -> None:
    org = uuid.uuid4()
    sent = [HOLD.send(_hold(org, 4.0)) for _ in range(4)]
    _settled(runtime, *sent)
    first = procs.worker(
        threads=4,
        name="first",
        args=["--worker-shutdown-timeout", "300"],
        env={"TRACKING_START_WRITE_AFTER_MS": "60000"},  # kept until they end
    )
    wait_for(
        lambda: sum(line.startswith("hold start") for line in procs.mark_lines()) == 4,
        timeout=15,
        what="4 runs in flight",
    )
    assert {runs.find(s.job_id, org_id=org).status for s in sent} == {"QUEUED"}  # all kept
    first.send_signal(signal.SIGTERM)
    assert first.wait(20) == 0
    said = first.events("worker.handed_back")
    assert said and said[0]["runs"] == 4, first.log()[-3000:]
    for s in sent:  # the interrupted execution is on the record; the key asks the store
        assert [(e, a) for e, a, _, _ in _executions(db, s.job_id)] == [(1, 1)]
        assert _key(runtime, s.job_id) == f"{s.message_id}|written"

    procs.worker(threads=4, name="next")
    for s in sent:
        done = wait_run(s.job_id, "COMPLETED", org_id=org, timeout=30)
        assert (done.attempt, done.executions) == (1, 2)  # handed back: not an attempt


def test_a_run_sent_again_after_redis_lost_its_data_has_its_start_written_first(
    runtime, writes, request: pytest.FixtureRequest
) -> None:
    """Its kept start, if any, went with the Redis data: the maintenance's recovery sends it
    again (`recovered`), and its start is written before it runs, not kept."""
    org = uuid.uuid4()
    sent = ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "lost"})
    _settled(runtime, sent)
    ns, client = runtime.settings.broker_namespace, runtime.broker.client
    lost = [*client.scan_iter(f"{ns}:testq*"), dedup_key(ns, sent.job_id)]
    client.delete(*lost)  # the message, its lane and its job id's key: Redis lost its data

    recovered = maintenance.recover_lost(runtime, now=datetime.now(UTC), older_than_s=0)
    assert sent.job_id in recovered
    request.getfixturevalue("fleet")
    run = wait_run(sent.job_id, "COMPLETED", org_id=org)
    assert writes(sent.job_id) == ["QUEUED", "RUNNING", "COMPLETED"]
    assert (run.attempt, run.executions) == (1, 1)
