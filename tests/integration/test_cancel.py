"""Cancellation is cooperative: a QUEUED run never starts; a RUNNING one stops at its next
progress report."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from shared.jobs import runs
from tests.support.jobs import ECHO, SLEEP
from tests.support.wait import wait_for, wait_run


def test_a_canceled_queued_job_is_skipped_when_it_arrives(
    runtime, marks: Path, request: pytest.FixtureRequest
) -> None:
    org = uuid.uuid4()
    sent = ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "never"})
    wait_run(sent.job_id, "QUEUED", org_id=org)
    assert runs.cancel(sent.job_id, org_id=org) == "CANCELED"

    request.getfixturevalue("fleet")
    ns, client = runtime.settings.broker_namespace, runtime.broker.client
    wait_for(lambda: client.hlen(f"{ns}:testq.msgs") == 0, what="the message consumed and acked")
    assert client.zcard(f"{ns}:testq.XQ") == 0
    run = runs.find(sent.job_id, org_id=org)
    assert run is not None and (run.status, run.error_code, run.started_at) == (
        "CANCELED",
        "CANCELED",
        None,
    )
    assert marks.read_text() == ""


def test_a_running_job_canceled_stops_at_its_next_progress(fleet, marks: Path) -> None:
    org = uuid.uuid4()
    sent = SLEEP.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 20})
    wait_for(lambda: (r := runs.find(sent.job_id, org_id=org)) and r.progress, what="progress")

    assert runs.cancel(sent.job_id, org_id=org) == "CANCEL_REQUESTED"
    run = wait_run(sent.job_id, "CANCELED", org_id=org, timeout=5)  # not the 20 s of the job

    assert run.error_code == "CANCELED" and run.finished_at is not None
    assert marks.read_text().splitlines() == [f"start {sent.job_id} "]  # it never reached its end
    assert run.progress["done"] < run.progress["total"]
