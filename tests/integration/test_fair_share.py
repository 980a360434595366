"""Fair share, priorities and per-org limits hold across two worker processes (issue 37).

The bound stated in docs/kernel.md ("Fair share, limits and priorities"): a job is taken by the
next fetch of any consumer of its queue, after at most one message of each other lane of its
priority (and one of a lower priority, its turn); it then starts after at most what that process
had already taken (prefetch: 2 x threads). So between its send and its start, at most
processes x prefetch + 2 other jobs start. Before (one FIFO list), every job queued ahead of it.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

import pytest

from shared.runtime import Runtime
from tests.support.jobs import HOLD, SLEEP
from tests.support.procs import Procs
from tests.support.wait import wait_for, wait_run

THREADS = 4
PROCESSES = 2
#: Jobs that may start between a job's send and its start (see the module's docstring).
BOUND = PROCESSES * 2 * THREADS + 2


def _starts_between(marks: Path, before: int, job_id: str) -> int:
    """Other jobs started after the first `before` lines and before `job_id`'s start."""
    lines = marks.read_text().splitlines()[before:]
    mine = next(i for i, line in enumerate(lines) if line.startswith(f"start {job_id} "))
    return sum(line.startswith("start ") for line in lines[:mine])


def _burst(org: str, count: int, *, seconds: float, priority: str = "default") -> None:
    for _ in range(count):
        SLEEP.send(
            {"org_id": org, "entity_id": str(uuid.uuid4()), "seconds": seconds, "marker": org},
            priority=priority,  # type: ignore[arg-type]
        )


def _one(org: str, marker: str, priority: str = "default") -> str:
    return SLEEP.send(
        {"org_id": org, "entity_id": str(uuid.uuid4()), "seconds": 0.0, "marker": marker},
        priority=priority,  # type: ignore[arg-type]
    ).job_id


# timing: what starts between the send and `before` counts against the bound; on a machine
# loaded by six test processes that gap alone lets more jobs start than the bound allows.
@pytest.mark.slow
@pytest.mark.timing
def test_a_small_orgs_job_starts_within_the_bound_behind_a_large_orgs_1000(
    runtime: Runtime, procs: Procs
) -> None:
    for _ in range(PROCESSES):
        procs.worker(threads=THREADS)
    big = str(uuid.uuid4())
    _burst(big, 1_000, seconds=0.05)
    wait_for(lambda: len(procs.mark_lines()) > 20, what="the large org's jobs running")
    before = len(procs.mark_lines())
    small = _one(str(uuid.uuid4()), "small")
    wait_run(small, "COMPLETED", timeout=30)
    ahead = _starts_between(procs.marks, before, small)
    print(
        f"\nsmall org's job: {ahead} jobs of the large org started between its send and its start"
    )
    assert ahead <= BOUND, f"{ahead} jobs started before the small org's (bound {BOUND})"


# timing: what starts between the send and `before` counts against the bound; on a machine
# loaded by six test processes that gap alone lets more jobs start than the bound allows.
@pytest.mark.slow
@pytest.mark.timing
def test_a_high_job_sent_behind_5000_low_ones_starts_within_the_bound(
    runtime: Runtime, procs: Procs
) -> None:
    org = str(uuid.uuid4())
    _burst(org, 5_000, seconds=0.02, priority="low")
    for _ in range(PROCESSES):
        procs.worker(threads=THREADS)
    wait_for(lambda: len(procs.mark_lines()) > 20, what="the low jobs running")
    before = len(procs.mark_lines())
    high = _one(org, "high", priority="high")
    wait_run(high, "COMPLETED", timeout=30)
    ahead = _starts_between(procs.marks, before, high)
    print(f"\nhigh job: {ahead} low jobs started between its send and its start")
    assert ahead <= BOUND, f"{ahead} low jobs started before the high one (bound {BOUND})"


def _most_at_once(lines: list[str], org_tag: str, killed: dict[int, float]) -> int:
    """Most `test:hold` jobs tagged `org_tag` running at once; a run of a killed process ends
    when its process was killed."""
    spans: dict[tuple[str, int], list[float]] = {}
    for line in lines:
        parts = line.split()
        if parts[:1] != ["hold"] or parts[-1] != org_tag:
            continue
        _, edge, job_id, pid, at, _tag = parts
        span = spans.setdefault((job_id, int(pid)), [float(at), float("inf")])
        if edge == "end":
            span[1] = float(at)
    events = []
    for (_, pid), (start, end) in spans.items():
        end = min(end, killed.get(pid, float("inf")))
        events += [(start, 1), (end, -1)]
    most = running = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        running += step
        most = max(most, running)
    return most


@pytest.mark.slow
def test_a_per_org_limit_holds_under_a_sigkill_storm_and_every_job_completes(
    runtime: Runtime, procs: Procs
) -> None:
    capped, free = str(uuid.uuid4()), str(uuid.uuid4())
    # Every org at most 2 at once, but `free`, whose own limit is 6 (settings).
    env = {
        "ORG_CONCURRENCY": json.dumps({"testq": 2}),
        "ORG_CONCURRENCY_OVERRIDES": json.dumps({"testq": {free: 6}}),
    }
    workers = [procs.worker(threads=THREADS, env=env) for _ in range(PROCESSES)]
    sent = [
        HOLD.send({"org_id": org, "entity_id": str(uuid.uuid4()), "seconds": 0.4, "tag": org})
        for org in [capped] * 16 + [free] * 6
    ]
    killed: dict[int, float] = {}
    for round_ in range(3):  # the storm: a worker SIGKILLed mid-run, a new one started
        time.sleep(1.0)
        victim = workers.pop(0)
        pid = victim.children()[0] if victim.children() else victim.pid
        victim.kill_group(signal.SIGKILL)
        killed[pid] = time.time()
        workers.append(procs.worker(threads=THREADS, env=env, name=f"storm{round_}"))
    runs = [wait_run(s.job_id, "COMPLETED", timeout=60) for s in sent]
    lines = procs.mark_lines()
    assert _most_at_once(lines, capped, killed) <= 2, "the per-org limit was exceeded"
    assert _most_at_once(lines, free, killed) > 2, "an org with a higher limit runs more at once"
    # Waiting for a slot spends no attempt: each attempt is an execution (a kill's included).
    assert all(run.attempt == run.executions for run in runs), [
        (r.attempt, r.executions) for r in runs
    ]
