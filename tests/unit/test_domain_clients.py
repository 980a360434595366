"""The domain clients (`workers.<domain>.client`) on the test kit: no Redis, no Postgres.

Each client validates before writing anything, writes its domain row with an id generated
client-side (no RETURNING, so a recording session can run it) and stages its job through the
outbox in the caller's transaction.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.errors import PayloadError
from shared.jobs import catalog
from shared.storage.backends.local import LocalBackend
from shared.testing import JobCapture
from workers.ai.client import request_ai_task
from workers.doc.client import ingest_document
from workers.email.client import schedule_email
from workers.export.client import request_export

pytest_plugins = ["shared.testing.plugin"]

ORG, USER = uuid.uuid4(), uuid.uuid4()
PDF = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"


def locs(exc: pytest.ExceptionInfo[PayloadError]) -> list[tuple[object, ...]]:
    return [tuple(e["loc"]) for e in exc.value.errors]


def test_an_email_due_now_is_a_row_and_its_job_in_one_transaction(jobfleet: JobCapture) -> None:
    session = jobfleet.session()

    with session.begin():
        email = schedule_email(
            session,
            org_id=ORG,
            template_key="welcome",
            recipient_email="ada@example.com",
            variables={"NAME": "Ada"},
        )

    (insert,) = session.inserts_into("scheduled_emails", committed=True)
    assert insert.params["id"] == email.email_id and insert.params["status"] == "QUEUED"
    job = jobfleet.assert_sent(
        catalog.EMAIL_SEND, entity_id=email.email_id, template_key="welcome", variables__NAME="Ada"
    )
    assert (job.job_id, job.via, email.status) == (email.job_id, "outbox", "QUEUED")
    assert job.job_id == catalog.EMAIL_SEND.job_id(job.payload)
    assert "RETURNING" not in insert.sql


def test_an_email_due_later_is_scheduled_without_a_job(jobfleet: JobCapture) -> None:
    session = jobfleet.session()
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)

    email = schedule_email(
        session,
        org_id=ORG,
        template_key="otp-code",
        recipient_email="grace@example.com",
        variables={"CODE": "123 456", "EXPIRES_MINUTES": 10},
        send_at=now + timedelta(hours=1),
        now=now,
    )

    assert (email.status, email.job_id) == ("SCHEDULED", None)
    assert session.inserts_into("scheduled_emails")[0].params["send_at"] == now + timedelta(hours=1)
    jobfleet.assert_not_sent(catalog.EMAIL_SEND)


@pytest.mark.parametrize(
    ("template_key", "variables", "loc"),
    [
        ("no-such-template", {}, ("template_key",)),
        ("welcome", {}, ("variables",)),  # NAME missing
        (
            "support-reply",
            {"NAME": "x", "MESSAGE": "m", "TICKET_REF": "a\r\nBcc: x@y"},
            ("variables",),
        ),
        ("Welcome!", {"NAME": "x"}, ("template_key",)),  # the contract's pattern
    ],
)
def test_an_email_the_worker_could_not_render_is_refused_before_any_write(
    jobfleet: JobCapture, template_key: str, variables: dict[str, object], loc: tuple[str]
) -> None:
    session = jobfleet.session()

    with pytest.raises(PayloadError) as exc:
        schedule_email(
            session,
            org_id=ORG,
            template_key=template_key,
            recipient_email="ada@example.com",
            variables=variables,
        )

    assert locs(exc) == [loc]
    assert session.statements == [] and jobfleet.sent_jobs() == []


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


def test_an_ai_task_writes_its_row_and_stages_ai_run(jobfleet: JobCapture) -> None:
    session = jobfleet.session()

    task = request_ai_task(
        session,
        org_id=ORG,
        task="classify",
        input="The invoice is overdue.",
        params={"labels": ["billing", "support"]},
    )

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


def test_a_document_is_stored_then_its_rows_and_doc_ingest_staged(
    jobfleet: JobCapture, tmp_path: Path
) -> None:
    storage = LocalBackend(tmp_path, "docs", signing_key=b"k" * 32)
    session = jobfleet.session()

    doc = ingest_document(session, storage, org_id=ORG, filename="facture été.pdf", data=PDF)

    (file_row,) = session.inserts_into("file_objects")
    (doc_row,) = session.inserts_into("documents")
    assert file_row.params["id"] == doc.file_object_id == doc_row.params["file_object_id"]
    assert storage.read(file_row.params["key"]) == PDF
    assert doc_row.params["filename"] == "facture été.pdf"
    jobfleet.assert_sent(
        catalog.DOC_INGEST, entity_id=doc.document_id, file_object_id=doc.file_object_id
    )


@pytest.mark.parametrize(
    ("data", "schema", "loc"),
    [
        (b"", "auto", ("data",)),
        (b"PK\x03\x04 a zip", "auto", ("data",)),
        (PDF + b"x" * 2_000, "auto", ("data",)),  # over max_bytes below
        (PDF, "passport", ("schema_name",)),
    ],
)
def test_an_upload_the_worker_would_refuse_is_refused_before_storing_it(
    jobfleet: JobCapture, tmp_path: Path, data: bytes, schema: str, loc: tuple[str]
) -> None:
    storage = LocalBackend(tmp_path, "docs", signing_key=b"k" * 32)
    session = jobfleet.session()

    with pytest.raises(PayloadError) as exc:
        ingest_document(
            session,
            storage,
            org_id=ORG,
            filename="x.pdf",
            data=data,
            schema_name=schema,
            max_bytes=1_000,
        )

    assert locs(exc) == [loc]
    assert session.statements == [] and jobfleet.sent_jobs() == []
    assert storage.list_keys("") == []
