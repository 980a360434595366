"""The doc domain's client (`workers.doc.client`) on the test kit: no Redis, no Postgres.

It validates an upload before storing it, stores it, writes its `file_objects` and `documents` rows
with ids generated client-side and stages `doc:ingest` through the outbox in the caller's
transaction.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from shared.errors import PayloadError
from shared.jobs import catalog
from shared.storage.backends.local import LocalBackend
from shared.testing import JobCapture
from workers.doc.client import ingest_document

pytest_plugins = ["shared.testing.plugin"]

ORG = uuid.uuid4()
PDF = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"


def locs(exc: pytest.ExceptionInfo[PayloadError]) -> list[tuple[object, ...]]:
    return [tuple(e["loc"]) for e in exc.value.errors]


def test_a_document_is_stored_then_its_rows_and_doc_ingest_staged(
    jobfleet: JobCapture, tmp_path: Path
) -> None:
    storage = LocalBackend(tmp_path, "docs", signing_key=b"k" * 32)
    session = jobfleet.session()

    doc = ingest_document(session, storage, org_id=ORG, filename="facture été.pdf", data=PDF)
    session.commit()  # staged in the transaction: sent once it commits

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
