"""At least once, executed once: a finished run delivered again is acknowledged, not re-run."""

from __future__ import annotations

import uuid
from pathlib import Path

import dramatiq
import pytest

from shared.jobs import runs
from tests.support.jobs import ECHO
from tests.support.queues import queued
from tests.support.wait import wait_for, wait_run


def test_a_completed_job_delivered_again_is_acknowledged_without_running(
    runtime, marks: Path, request: pytest.FixtureRequest
) -> None:
    org = uuid.uuid4()
    sent = ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "once"})
    ns = runtime.settings.broker_namespace
    client = runtime.broker.client
    (raw,) = client.hvals(f"{ns}:testq.msgs")  # the message exactly as Redis holds it
    assert dramatiq.Message.decode(raw).message_id == sent.message_id

    fleet = request.getfixturevalue("fleet")
    done = wait_run(sent.job_id, "COMPLETED", org_id=org)
    wait_for(lambda: client.hlen(f"{ns}:testq.msgs") == 0, what="the first delivery acknowledged")
    assert marks.read_text().splitlines() == [f"echo {sent.job_id} 1"]

    # Redelivery (a requeue after a crash, a duplicate publish): the very same message again.
    fleet.broker.enqueue(dramatiq.Message.decode(raw))
    wait_for(
        lambda: client.hlen(f"{ns}:testq.msgs") == 0 and queued(client, ns, "testq") == 0,
        what="redelivery acked",
    )
    assert client.zcard(f"{ns}:testq.XQ") == 0  # acknowledged, not dead-lettered

    again = runs.find(sent.job_id, org_id=org)
    assert again is not None
    assert marks.read_text().splitlines() == [f"echo {sent.job_id} 1"]
    assert (again.status, again.attempt, again.finished_at, again.result) == (
        "COMPLETED",
        1,
        done.finished_at,
        done.result,
    )
