"""A job's log lines carry who it is (DESIGN §5): JSON on the worker process's stderr."""

from __future__ import annotations

import uuid

import pytest

from tests.support.jobs import ECHO
from tests.support.procs import Procs
from tests.support.wait import wait_run


@pytest.mark.slow
def test_job_log_lines_carry_the_job_identity_and_the_request_id(runtime, procs: Procs) -> None:
    worker = procs.worker(threads=2)
    org = uuid.uuid4()
    sent = ECHO.send(
        {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "hi"}, request_id="req-xyz"
    )
    wait_run(sent.job_id, "COMPLETED", org_id=org)

    lines = [e for e in worker.json_lines() if e.get("job_id") == sent.job_id]
    finished = [e for e in lines if e.get("event") == "run.finished"]
    assert len(finished) == 1, lines
    assert {
        k: finished[0].get(k)
        for k in ("job_name", "job_id", "message_id", "org_id", "attempt", "request_id")
    } == {
        "job_name": "test:echo",
        "job_id": sent.job_id,
        "message_id": sent.message_id,
        "org_id": str(org),
        "attempt": 1,
        "request_id": "req-xyz",
    }
    assert finished[0]["status"] == "COMPLETED" and finished[0]["level"] == "info"
    # Lines outside a job do not inherit a job's identity (contextvars unbound after it).
    ready = worker.events("worker.ready")
    assert ready and "job_id" not in ready[0]
