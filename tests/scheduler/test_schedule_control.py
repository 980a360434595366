"""`fleet schedule`'s actions on real scheduler processes: a paused periodic job does not run
on any replica until resumed, and `run-now` runs a job once however many replicas there are."""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

import pytest

from scheduler.schedule import SCHEDULE
from shared import outbox, periodic
from shared.jobs import catalog
from shared.pauses import history, redis_client
from shared.runtime import Runtime
from tests.support.procs import Proc, Procs
from tests.support.wait import wait_for

NIL = "00000000-0000-0000-0000-000000000000"
NAMES = tuple(job.name for job in SCHEDULE)

pytestmark = pytest.mark.slow


def schedulers(procs: Procs, count: int) -> list[Proc]:
    started = []
    for n in range(count):
        proc = Proc(
            [sys.executable, "-m", "scheduler"],
            # A long maintenance interval: any maintenance run in this test is a run-now.
            env=procs.env({"HEALTH_PORT": "0", "MAINTENANCE_INTERVAL_S": "3600"}),
            log_path=procs.tmp / f"scheduler-{n}.log",
        )
        procs.started.append(proc)
        started.append(proc)
    for proc in started:
        wait_for(
            lambda p=proc: "scheduler.started" in p.log(), timeout=30, what="scheduler started"
        )
    return started


def events(proc: Proc, name: str) -> list[dict[str, Any]]:
    lines = (json.loads(x) for x in proc.log().splitlines() if x.startswith("{"))
    return [line for line in lines if line.get("event") == name]


def outbox_status(db: Any, event_id: Any) -> str:
    return str(
        db.execute("SELECT status FROM outbox_events WHERE id = %s", (event_id,)).fetchone()[0]
    )


def test_a_paused_periodic_job_runs_on_no_replica_until_resumed(
    procs: Procs, runtime: Runtime, db: Any
) -> None:
    periodic.pause(runtime, "outbox-relay", by="ops", reason="relay incident", known=NAMES)
    replicas = schedulers(procs, 2)
    with runtime.sessions.begin() as session:
        event_id = outbox.enqueue(
            session, catalog.EMAIL_SEQ_RUN_DUE, {"org_id": NIL, "slot": f"t-{uuid.uuid4()}"}
        ).id

    def skipped() -> bool:
        (state,) = periodic.states(
            redis_client(runtime), runtime.settings.broker_namespace, ["outbox-relay"]
        )
        return bool(state.last and state.last["outcome"] == "paused")

    wait_for(skipped, timeout=15, what="a skipped (paused) relay run")
    time.sleep(3)  # three relay periods
    assert outbox_status(db, event_id) == "PENDING"

    periodic.resume(runtime, "outbox-relay", by="ops", reason="fixed", known=NAMES)
    wait_for(
        lambda: outbox_status(db, event_id) == "PUBLISHED",
        timeout=15,
        what="the relay after resume",
    )
    assert [a["action"] for a in history(runtime, target="outbox-relay")] == ["resume", "pause"]
    assert all(proc.alive() for proc in replicas)


# timing: the run-now must happen within 15 s; two scheduler processes beside five other test
# processes on 2 cores missed it once in CI (448 s main lane), in 3.9 s alone.
@pytest.mark.timing
def test_run_now_runs_a_job_once_across_two_replicas(procs: Procs, runtime: Runtime) -> None:
    replicas = schedulers(procs, 2)
    ns = runtime.settings.broker_namespace
    before = periodic.states(redis_client(runtime), ns, ["maintenance"])[0].last

    periodic.run_now(
        runtime, "maintenance", by="ops@example.com", reason="after a fix", known=NAMES
    )

    def ran() -> Any:
        last = periodic.states(redis_client(runtime), ns, ["maintenance"])[0].last
        return last if last and last != before and last.get("by") == "ops@example.com" else None

    last = wait_for(ran, timeout=15, what="the run-now of maintenance")
    assert last["outcome"] == "ok"
    time.sleep(2)  # both replicas polled the request several times meanwhile
    claims = [event for proc in replicas for event in events(proc, "scheduler.run_now")]
    assert [(c["job"], c["by"]) for c in claims] == [("maintenance", "ops@example.com")]
    assert not periodic.states(redis_client(runtime), ns, ["maintenance"])[0].run_now_requested


def test_unknown_periodic_jobs_are_refused(runtime: Runtime) -> None:
    with pytest.raises(periodic.UnknownPeriodicJob, match="unknown periodic job 'relay'"):
        periodic.pause(runtime, "relay", by="ops", reason="typo", known=NAMES)


def test_a_jobs_own_word_on_its_pass_is_shown_beside_the_operators_pause(runtime: Runtime) -> None:
    """The lottery keeper answers `paused` while the contract's own `paused()` is on: that is
    the job's detail, distinct from an operator's pause of the job."""
    from scheduler.chain.keeper import KeeperResult
    from scheduler.process import run_periodic, utcnow
    from scheduler.schedule import Periodic

    keeper = Periodic("lottery-keeper", lambda rt, now: KeeperResult("paused"), lambda: 10.0)
    run_periodic(keeper, runtime, utcnow)

    (state,) = periodic.states(
        redis_client(runtime), runtime.settings.broker_namespace, ["lottery-keeper"]
    )
    assert state.paused is None
    assert state.last is not None and (state.last["outcome"], state.last["detail"]) == (
        "ok",
        "paused",
    )
