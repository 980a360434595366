"""The export domain's client (`workers.export.client`) on the test kit: no Redis, no Postgres.

It validates before writing anything, writes its `exports` row with an id generated client-side
and stages `export:build` through the outbox in the caller's transaction.
"""

from __future__ import annotations

import json
import uuid

import pytest

from shared.errors import PayloadError
from shared.jobs import catalog
from shared.testing import JobCapture
from workers.export.client import request_export

pytest_plugins = ["shared.testing.plugin"]

ORG, USER = uuid.uuid4(), uuid.uuid4()


def locs(exc: pytest.ExceptionInfo[PayloadError]) -> list[tuple[object, ...]]:
    return [tuple(e["loc"]) for e in exc.value.errors]


def test_an_export_request_writes_its_row_and_stages_export_build(jobfleet: JobCapture) -> None:
    session = jobfleet.session()
    params = {"format": "XLSX", "filters": {"status": ["DEAD"]}}

    with session.begin():
        export = request_export(
            session, org_id=ORG, requested_by=USER, type="JOB_RUNS", params=params
        )

    (insert,) = session.inserts_into("exports", committed=True)
    assert insert.params["id"] == export.export_id
    assert json.loads(insert.params["params"])["format"] == "XLSX"
    job = jobfleet.assert_sent(
        catalog.EXPORT_BUILD, entity_id=export.export_id, type="JOB_RUNS", params__format="XLSX"
    )
    assert job.job_id == export.job_id


@pytest.mark.parametrize(
    ("type_", "params", "loc"),
    [
        ("NO_SUCH_TYPE", {}, ("type",)),
        ("JOB_RUNS", {"filters": {"colour": ["red"]}}, ("params", "filters")),
        ("JOB_RUNS", {"format": "DOCX"}, ("params", "format")),
        ("JOB_RUNS", {"format": "PDF", "bom": True}, ("params",)),
    ],
)
def test_an_export_the_worker_would_refuse_is_refused_before_any_write(
    jobfleet: JobCapture, type_: str, params: dict[str, object], loc: tuple[str, ...]
) -> None:
    session = jobfleet.session()

    with pytest.raises(PayloadError) as exc:
        request_export(session, org_id=ORG, requested_by=USER, type=type_, params=params)

    assert locs(exc) == [loc]
    assert session.statements == [] and jobfleet.sent_jobs() == []


def test_a_rolled_back_request_commits_nothing(jobfleet: JobCapture) -> None:
    session = jobfleet.session()

    with pytest.raises(RuntimeError), session.begin():
        request_export(session, org_id=ORG, requested_by=USER, type="JOB_RUNS")
        raise RuntimeError("the product's own write failed")

    assert session.committed == [] and session.rollbacks == 1
