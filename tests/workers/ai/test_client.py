"""The ai domain's client (`workers.ai.client`) on the test kit: no Redis, no Postgres.

It validates before writing anything, writes its `ai_tasks` row with an id generated client-side
and stages `ai:run` through the outbox in the caller's transaction.
"""

from __future__ import annotations

import uuid

import pytest

from shared.errors import PayloadError
from shared.jobs import catalog
from shared.testing import JobCapture
from workers.ai.client import request_ai_task

pytest_plugins = ["shared.testing.plugin"]

ORG = uuid.uuid4()


def locs(exc: pytest.ExceptionInfo[PayloadError]) -> list[tuple[object, ...]]:
    return [tuple(e["loc"]) for e in exc.value.errors]


def test_an_ai_task_writes_its_row_and_stages_ai_run(jobfleet: JobCapture) -> None:
    session = jobfleet.session()

    task = request_ai_task(
        session,
        org_id=ORG,
        task="classify",
        input="The invoice is overdue.",
        params={"labels": ["billing", "support"]},
    )
    session.commit()  # staged in the transaction: sent once it commits

    (insert,) = session.inserts_into("ai_tasks")
    assert insert.params["id"] == task.task_id and insert.params["task"] == "classify"
    job = jobfleet.assert_sent(catalog.AI_RUN, entity_id=task.task_id, task="classify")
    assert job.job_id == task.job_id and job.payload.params == {"labels": ["billing", "support"]}


@pytest.mark.parametrize(
    ("task", "input_", "params", "loc"),
    [
        ("classify", "text", {"labels": ["a", "a"]}, ("params",)),
        ("extract", "text", {}, ("params",)),  # no schema
        ("summarize", "   ", {}, ("input",)),
        ("translate", "text", {}, ("task",)),
    ],
)
def test_an_ai_task_the_worker_would_refuse_is_refused_before_any_write(
    jobfleet: JobCapture, task: str, input_: str, params: dict[str, object], loc: tuple[str]
) -> None:
    session = jobfleet.session()

    with pytest.raises(PayloadError) as exc:
        request_ai_task(session, org_id=ORG, task=task, input=input_, params=params)

    assert locs(exc) == [loc]
    assert session.statements == [] and jobfleet.sent_jobs() == []
