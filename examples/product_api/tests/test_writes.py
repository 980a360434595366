"""What the example API sends, checked with the test kit: contracts, job ids, one transaction."""

from __future__ import annotations

import uuid

from examples.product_api.settings import DEV_ORG_A
from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.testing import JobCapture
from workers.email.contracts import EmailSendV1

from .conftest import Api

PDF = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"


def test_post_email_commits_its_row_and_stages_email_send(api: Api, jobfleet: JobCapture) -> None:
    answer = api.client.post(
        "/emails",
        json={
            "template_key": "welcome",
            "recipient_email": "ada@example.com",
            "variables": {"NAME": "Ada"},
        },
    )

    assert answer.status_code == 202, answer.text
    body = answer.json()
    job = jobfleet.assert_sent(
        catalog.EMAIL_SEND,
        org_id=DEV_ORG_A,
        template_key="welcome",
        recipient_email="ada@example.com",
    )
    assert (body["job_id"], body["status_url"]) == (job.job_id, f"/jobs/{job.job_id}")
    entity_id = job.payload.wire()["entity_id"]
    assert body["id"] == entity_id and job.via == "outbox"
    (session,) = api.sessions
    assert session.commits == 1
    inserted = session.inserts_into("scheduled_emails", committed=True)
    assert [str(s.params["id"]) for s in inserted] == [entity_id]


def test_a_direct_email_is_sent_within_the_request(api: Api, jobfleet: JobCapture) -> None:
    answer = api.client.post(
        "/emails",
        json={
            "template_key": "welcome",
            "recipient_email": "ada@example.com",
            "variables": {"NAME": "A"},
            "direct": True,
        },
    )

    assert answer.status_code == 202, answer.text
    assert jobfleet.assert_sent(catalog.EMAIL_SEND).via == "send"


def test_bad_input_is_422_with_field_paths_and_nothing_is_sent(
    api: Api, jobfleet: JobCapture
) -> None:
    missing_var = api.client.post(
        "/emails", json={"template_key": "welcome", "recipient_email": "ada@example.com"}
    )
    bad_format = api.client.post(
        "/exports", json={"type": "JOB_RUNS", "params": {"format": "DOCX"}}
    )
    bad_filter = api.client.post(
        "/exports", json={"type": "JOB_RUNS", "params": {"filters": {"colour": ["red"]}}}
    )
    not_pdf = api.client.post("/documents", files={"file": ("a.pdf", b"hello", "application/pdf")})

    assert [r.status_code for r in (missing_var, bad_format, bad_filter, not_pdf)] == [422] * 4
    assert missing_var.json()["detail"][0]["loc"] == ["body", "variables"]
    assert bad_format.json()["detail"][0]["loc"][:3] == ["body", "params", "format"]
    assert bad_filter.json()["detail"][0]["loc"] == ["body", "params", "filters"]
    assert not_pdf.json()["detail"][0]["loc"] == ["body", "file"]
    assert jobfleet.sent_jobs() == []


def test_post_export_answers_its_job_and_the_captured_job_runs_inline(
    api: Api, jobfleet: JobCapture
) -> None:
    answer = api.client.post(
        "/exports",
        json={"type": "JOB_RUNS", "params": {"format": "XLSX", "filters": {"status": ["DEAD"]}}},
    )

    assert answer.status_code == 202, answer.text
    job = jobfleet.assert_sent(catalog.EXPORT_BUILD, type="JOB_RUNS", params__format="XLSX")
    assert answer.json()["job_id"] == job.job_id
    built: list[str] = []
    jobfleet.drain({catalog.EXPORT_BUILD: lambda payload, ctx: built.append(ctx.job_id)})
    assert built == [job.job_id] and job.status == "COMPLETED"


def test_post_document_stores_the_file_and_stages_doc_ingest(
    api: Api, jobfleet: JobCapture
) -> None:
    answer = api.client.post(
        "/documents",
        files={"file": ("invoice.pdf", PDF, "application/pdf")},
        data={"schema": "invoice"},
    )

    assert answer.status_code == 202, answer.text
    job = jobfleet.assert_sent(catalog.DOC_INGEST, entity_id=uuid.UUID(answer.json()["id"]))
    (file_row,) = api.sessions[0].inserts_into("file_objects", committed=True)
    assert str(file_row.params["id"]) == job.payload.wire()["file_object_id"]
    assert api.storage.read(file_row.params["key"]) == PDF


def test_post_ai_task_stages_ai_run(api: Api, jobfleet: JobCapture) -> None:
    answer = api.client.post(
        "/ai/tasks",
        json={"task": "summarize", "input": "A long text.", "params": {"max_words": 20}},
    )
    refused = api.client.post(
        "/ai/tasks", json={"task": "classify", "input": "x", "params": {"labels": ["a"]}}
    )

    assert answer.status_code == 202, answer.text
    jobfleet.assert_sent(catalog.AI_RUN, task="summarize", params__max_words=20)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "params"]


def test_a_request_without_a_known_key_is_401_and_sends_nothing(
    api: Api, jobfleet: JobCapture
) -> None:
    answer = api.client.post(
        "/emails",
        json={
            "template_key": "welcome",
            "recipient_email": "a@example.com",
            "variables": {"NAME": "A"},
        },
        headers={"X-API-Key": "not-a-key"},
    )

    assert answer.status_code == 401
    jobfleet.assert_not_sent(catalog.EMAIL_SEND)


def test_the_email_handler_sees_the_payload_a_worker_would(api: Api, jobfleet: JobCapture) -> None:
    api.client.post(
        "/emails",
        json={
            "template_key": "otp-code",
            "recipient_email": "g@example.com",
            "variables": {"CODE": "1", "EXPIRES_MINUTES": 5},
        },
    )
    seen: list[EmailSendV1] = []

    def fake_send(payload: EmailSendV1, ctx: JobContext) -> None:
        seen.append(payload)

    jobfleet.drain({catalog.EMAIL_SEND: fake_send})

    assert [p.variables for p in seen] == [{"CODE": "1", "EXPIRES_MINUTES": 5}]


def test_the_openapi_schema_is_served(api: Api) -> None:
    schema = api.client.get("/openapi.json")

    assert schema.status_code == 200, schema.text
    assert {"/emails", "/exports", "/documents", "/ai/tasks", "/jobs/{job_id}"} <= set(
        schema.json()["paths"]
    )
