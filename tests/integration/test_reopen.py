"""A canceled job may be sent again: its id is free, the run reopens and runs once."""

from __future__ import annotations

import uuid

import pytest

from shared.jobs import runs
from tests.support.jobs import ECHO
from tests.support.queues import queued
from tests.support.wait import wait_for


def test_a_canceled_job_sent_again_runs_once_and_its_canceled_delivery_does_not(
    fleet, runtime
) -> None:
    fleet.worker.pause()
    org = uuid.uuid4()
    payload = {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "again"}
    first = ECHO.send(payload)
    assert fleet.runtime.sender.flush(5)
    assert runs.cancel(first.job_id, org_id=org) == "CANCELED"
    assert ECHO.send(payload).duplicate is False  # released by the cancel

    # The canceled message is still queued ahead of the new one; resume the worker.
    again = ECHO.send(payload)
    assert again.duplicate is True
    fleet.worker.resume()
    run = wait_for(
        lambda: (r := runs.find(first.job_id, org_id=org)) and r.status == "COMPLETED" and r
    )
    assert run.result == {"echo": "again", "attempt": 1}
    assert run.cancel_requested is False and run.error_code is None


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_a_job_canceled_while_queued_stays_canceled_when_its_message_arrives(
    fleet, runtime
) -> None:
    fleet.worker.pause()
    org = uuid.uuid4()
    sent = ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "no"})
    assert fleet.runtime.sender.flush(5)
    assert runs.cancel(sent.job_id, org_id=org) == "CANCELED"
    fleet.worker.resume()
    ns = runtime.settings.broker_namespace
    wait_for(
        lambda: queued(runtime.broker.client, ns, "testq") == 0,
        what="the canceled message consumed",
    )
    fleet.worker.pause()  # let the skip be recorded (or not) before looking
    assert runs.find(sent.job_id, org_id=org).status == "CANCELED"
