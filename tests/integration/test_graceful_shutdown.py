"""SIGTERM: stop taking work, finish the in-flight job, hand the rest back unstarted, exit 0."""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from shared.jobs import runs
from tests.support.jobs import ECHO, SLEEP
from tests.support.procs import Procs
from tests.support.queues import queued as waiting
from tests.support.wait import wait_for, wait_run

GRACE_MS = 10_000


@pytest.mark.slow
def test_sigterm_finishes_the_running_job_and_hands_back_the_queued_ones(
    runtime, procs: Procs
) -> None:
    worker = procs.worker(threads=1, args=["--worker-shutdown-timeout", str(GRACE_MS)])
    org = uuid.uuid4()
    slow = SLEEP.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 2.5})
    wait_for(
        lambda: f"start {slow.job_id} " in procs.marks.read_text(), what="the slow job started"
    )
    queued = [
        ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": f"later {i}"})
        for i in range(4)
    ]

    worker.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    code = worker.wait(GRACE_MS / 1000 + 5)
    took = time.monotonic() - t0
    print(f"\nSIGTERM to exit: {took:.2f} s")
    assert code == 0, worker.log()[-3000:]
    assert took < GRACE_MS / 1000

    events = [e.get("event") for e in worker.json_lines()]
    assert events.index("worker.stopping") < events.index("run.finished")  # it was in flight
    assert runs.find(slow.job_id, org_id=org).status == "COMPLETED"  # type: ignore[union-attr]
    assert procs.mark_lines() == [f"start {slow.job_id} ", f"end {slow.job_id} "]
    # Handed back at once: in the queue again, not stranded in the stopped worker's ack set.
    ns = runtime.settings.broker_namespace
    assert waiting(runtime.broker.client, ns, "testq") == len(queued)
    for sent in queued:
        run = runs.find(sent.job_id, org_id=org)
        assert run is not None and run.status == "QUEUED" and run.attempt == 0

    procs.worker(threads=2, name="next")
    for sent in queued:
        assert wait_run(sent.job_id, "COMPLETED", org_id=org).attempt == 1
    echoes = [line for line in procs.mark_lines() if line.startswith("echo ")]
    assert sorted(echoes) == sorted(f"echo {sent.job_id} 1" for sent in queued)
