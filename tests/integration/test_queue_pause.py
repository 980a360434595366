"""Pausing a queue fleet-wide: in-flight jobs finish, nothing else starts, sends are still
accepted, the pause outlives a worker's death, and a resume runs every job exactly once."""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from shared import pauses
from shared.config import Settings
from shared.runtime import Runtime
from tests.support.jobs import SLEEP
from tests.support.procs import Procs
from tests.support.wait import wait_for

TEST_QUEUES = ("testq",)


def starts(procs: Procs, marker: str) -> Counter[str]:
    return Counter(
        line.split()[1]
        for line in procs.mark_lines()
        if line.startswith("start ") and line.endswith(f" {marker}")
    )


def ends(procs: Procs, marker: str) -> int:
    return sum(
        line.startswith("end ") and line.endswith(f" {marker}") for line in procs.mark_lines()
    )


def sleep(org: uuid.UUID, seconds: float, marker: str) -> str:
    """Send a test:sleep job; its job id."""
    payload = {
        "org_id": str(org),
        "entity_id": str(uuid.uuid4()),
        "seconds": seconds,
        "marker": marker,
    }
    return SLEEP.send(payload).job_id


def tally(db: Any, job_ids: list[str]) -> list[tuple[str, int, int]]:
    """(status, attempt, how many) of these runs."""
    rows = db.execute(
        "SELECT status, attempt, count(*) FROM job_runs WHERE job_id = ANY(%s) GROUP BY 1, 2 ORDER BY 1, 2",
        (job_ids,),
    ).fetchall()
    return [tuple(row) for row in rows]


@pytest.mark.slow
def test_a_paused_queue_finishes_in_flight_jobs_starts_nothing_else_and_resumes_exactly_once(
    runtime: Runtime, settings: Settings, procs: Procs, db
) -> None:
    # Each process holds no more messages than it has threads, so that the 8 jobs in flight are
    # spread over both (by default the first one to fetch would take all 8 and run 4).
    one_each = {"dramatiq_queue_prefetch": "4"}
    procs.worker(threads=4, name="a", env=one_each)
    procs.worker(threads=4, name="b", env=one_each)
    org = uuid.uuid4()

    long_ids = [sleep(org, 5.0, "long") for _ in range(8)]
    wait_for(lambda: len(starts(procs, "long")) == 8, timeout=20, what="8 jobs in flight")
    # Some queued behind them, ...
    quick_ids = [sleep(org, 0.0, "quick") for _ in range(100)]

    pause_info, changed = pauses.pause(
        runtime, "testq", by="ops@example.com", reason="incident", known=TEST_QUEUES
    )
    paused_at = time.monotonic()
    assert changed and pause_info.by == "ops@example.com"
    assert len(starts(procs, "quick")) == 0, (
        "the in-flight jobs ended before the pause: too slow a machine"
    )
    # ... and the rest sent while paused: accepted as usual.
    quick_ids += [sleep(org, 0.0, "quick") for _ in range(900)]

    # The 8 in flight complete; none of the 1,000 starts, for 10 s.
    wait_for(lambda: ends(procs, "long") == 8, timeout=20, what="the in-flight jobs to finish")
    time.sleep(max(0.0, 10.0 - (time.monotonic() - paused_at)))
    assert starts(procs, "quick") == Counter()
    # Sends are still accepted while paused (QUEUED, visible).
    late = sleep(org, 0.0, "quick")
    runtime.settle()
    assert db.execute("SELECT status FROM job_runs WHERE job_id = %s", (late,)).fetchone() == (
        "QUEUED",
    )

    # The pause is in Redis: a worker killed and replaced meanwhile takes nothing either.
    procs.started[0].kill_group(signal.SIGKILL)
    procs.worker(threads=4, name="c", env=one_each)
    time.sleep(2.0)
    assert starts(procs, "quick") == Counter()

    ended = pauses.resume(runtime, "testq", by="ops@example.com", reason="fixed", known=TEST_QUEUES)
    resumed_at = time.monotonic()
    assert ended is not None and ended.reason == "incident"
    wait_for(
        lambda: starts(procs, "quick"),
        timeout=5,
        interval=0.02,
        what="the first start after resume",
    )
    print(f"\nfirst start {time.monotonic() - resumed_at:.2f} s after resume")
    assert time.monotonic() - resumed_at < 2.0

    all_quick = [*quick_ids, late]
    wait_for(
        lambda: ends(procs, "quick") >= len(all_quick), timeout=90, what="every queued job to run"
    )
    counted = starts(procs, "quick")
    assert sorted(counted) == sorted(all_quick) and set(counted.values()) == {1}  # exactly once
    # The handler's last mark comes just before its outcome is written: wait for the rows.
    everyone = [*all_quick, *long_ids]
    wait_for(lambda: tally(db, everyone) == [("COMPLETED", 1, 1009)], timeout=30, what="the rows")
    assert tally(db, everyone) == [("COMPLETED", 1, 1009)]  # nothing handed back was an attempt
    audit = pauses.history(runtime, target="testq")
    assert [(a["action"], a["actor"], a["reason"]) for a in audit] == [
        ("resume", "ops@example.com", "fixed"),
        ("pause", "ops@example.com", "incident"),
    ]


def test_messages_a_worker_took_before_the_pause_are_handed_back_not_started(
    fleet, marks, runtime: Runtime, db
) -> None:
    """A worker holds more messages than it runs (Dramatiq prefetches twice its threads): those
    waiting in its thread queue when the pause comes are handed back, not started, no attempt."""
    org = uuid.uuid4()

    longs = [sleep(org, 1.5, "long") for _ in range(4)]  # the in-process worker has 4 threads
    wait_for(lambda: marks.read_text().count(" long\n") >= 4, what="4 jobs in flight")
    quick = [sleep(org, 0.0, "quick") for _ in range(6)]
    wait_for(
        lambda: fleet.worker.consumers["testq"].consumer.outstanding_message_count >= 8,
        what="the worker to prefetch behind the running jobs",
    )

    pauses.pause(runtime, "testq", by="ops", reason="test", known=TEST_QUEUES)
    wait_for(lambda: marks.read_text().count("end ") == 4, timeout=10, what="the running jobs")
    time.sleep(1.0)

    assert " quick" not in marks.read_text()
    assert tally(db, quick) == [("QUEUED", 0, 6)]

    pauses.resume(runtime, "testq", by="ops", known=TEST_QUEUES)
    wait_for(lambda: marks.read_text().count("end ") == 10, timeout=15, what="the handed-back jobs")
    # The handler's last mark comes just before its outcome is written: wait for the rows.
    wait_for(lambda: tally(db, [*quick, *longs]) == [("COMPLETED", 1, 10)], what="the rows")
    assert tally(db, [*quick, *longs]) == [("COMPLETED", 1, 10)]


def test_pausing_an_unknown_queue_is_refused_and_a_second_pause_keeps_the_first(
    runtime: Runtime,
) -> None:
    with pytest.raises(pauses.UnknownQueue, match="unknown queue 'nope'"):
        pauses.pause(runtime, "nope", by="ops", reason="typo")

    first, changed = pauses.pause(runtime, "email", by="alice", reason="provider ban")
    again, changed_again = pauses.pause(runtime, "email", by="bob", reason="me too")

    assert (changed, changed_again) == (True, False) and again == first
    assert list(pauses.paused_queues(runtime.broker.client, runtime.settings.broker_namespace)) == [
        "email"
    ]  # type: ignore[attr-defined]
    assert pauses.resume(runtime, "email", by="alice") == first
    assert pauses.resume(runtime, "email", by="alice") is None
    assert [a["action"] for a in pauses.history(runtime, target="email")] == ["resume", "pause"]
