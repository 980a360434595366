"""The doc domain's producer API: store an uploaded document and stage its `doc:ingest` in the
caller's transaction; search and read documents.

    from workers.doc.client import ingest_document

    with sessions() as session, session.begin():
        doc = ingest_document(session, storage, org_id=org, filename="invoice.pdf", data=pdf)

The upload is checked before anything is written (`PayloadError` naming the field): a PDF
(`%PDF-` header), not empty, at most `max_bytes` (a product passes `doc_settings().max_bytes`,
`DOC_MAX_BYTES`, the worker's own limit), a known extraction schema. The bytes go to
object storage first (the worker must find them), then the `file_objects` and `documents` rows
(ids generated here) and the job go into the caller's transaction. A rolled-back transaction
leaves the stored object without rows (its key is under the document's own prefix).

Importing this module boots nothing (no broker, no logging, no runtime, no PDF or OCR library).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import text

from shared import outbox
from shared.errors import PayloadError
from shared.jobs import catalog
from workers.doc.contracts import DocIngestV1

from .extract import SCHEMA_NAMES
from .settings import DocSettings, doc_settings

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.orm import Session

    from shared.storage import StorageBackend

    from .search import DocumentHit

Via = outbox.Via
DEFAULT_MAX_BYTES = 50 * 1024 * 1024

INSERT_FILE = text(
    "INSERT INTO file_objects (id, org_id, provider, bucket, key, content_type, size_bytes, sha256)"
    " VALUES (:id, :org_id, :provider, :bucket, :key, :content_type, :size_bytes, :sha256)"
)
INSERT_DOCUMENT = text(
    "INSERT INTO documents (id, org_id, file_object_id, filename, schema_name)"
    " VALUES (:id, :org_id, :file_object_id, :filename, :schema_name)"
)


@dataclass(frozen=True)
class IngestRequest:
    document_id: UUID
    file_object_id: UUID
    job_id: str


def _invalid(field: str, msg: str) -> PayloadError:
    return PayloadError(catalog.DOC_INGEST.name, [{"loc": (field,), "msg": msg}])


def check_upload(data: bytes, schema_name: str, max_bytes: int) -> None:
    if not data:
        raise _invalid("data", "the file is empty")
    if len(data) > max_bytes:
        raise _invalid("data", f"the file is {len(data)} bytes; the limit is {max_bytes}")
    if not data.lstrip()[:5] == b"%PDF-":
        raise _invalid("data", "not a PDF (no %PDF- header)")
    if schema_name not in SCHEMA_NAMES:
        raise _invalid(
            "schema_name", f"unknown schema {schema_name!r} (known: {', '.join(SCHEMA_NAMES)})"
        )


def safe_filename(filename: str) -> str:
    # ASCII only: object keys are plain names (`check_key`); the row keeps the real filename.
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "_" for c in filename)
    safe = safe.lstrip("._")
    return (safe or "file")[:120]


def ingest_document(
    session: Session,
    storage: StorageBackend,
    *,
    org_id: UUID,
    filename: str,
    data: bytes,
    content_type: str = "application/pdf",
    schema_name: str = "auto",
    max_bytes: int = DEFAULT_MAX_BYTES,
    via: Via = "outbox",
    request_id: str | None = None,
) -> IngestRequest:
    """Validate, store the bytes, insert the rows and stage `doc:ingest` in `session`'s
    transaction (the caller commits)."""
    check_upload(data, schema_name, max_bytes)
    document_id, file_id = uuid.uuid4(), uuid.uuid4()
    payload = catalog.DOC_INGEST.build(
        DocIngestV1(org_id=org_id, entity_id=document_id, file_object_id=file_id)
    )
    from shared.storage import object_key

    stored = storage.put(
        object_key(org_id, "documents", document_id, safe_filename(filename)), data, content_type
    )
    session.execute(
        INSERT_FILE,
        {
            "id": file_id,
            "org_id": org_id,
            "provider": stored.provider,
            "bucket": stored.bucket,
            "key": stored.key,
            "content_type": stored.content_type,
            "size_bytes": stored.size_bytes,
            "sha256": stored.sha256,
        },
    )
    session.execute(
        INSERT_DOCUMENT,
        {
            "id": document_id,
            "org_id": org_id,
            "file_object_id": file_id,
            "filename": filename[:255],
            "schema_name": schema_name,
        },
    )
    job_id = outbox.stage(session, catalog.DOC_INGEST, payload, via=via, request_id=request_id)
    return IngestRequest(document_id, file_id, job_id)


def search_documents(
    conn: psycopg.Connection[Any], org_id: UUID, query: str, *, limit: int = 10
) -> list[DocumentHit]:
    """Documents of `org_id` matching `query` (full text, French and English), best first."""
    from .search import search

    return search(conn, org_id, query, limit=limit)


def document_status(document_id: UUID, org_id: UUID) -> dict[str, Any] | None:
    """A document's status, pages and extracted fields (None: no such document for this org)."""
    from shared.runtime import get_runtime

    from .status import document_status as status

    return status(get_runtime().pool, document_id, org_id)


__all__ = [
    "SCHEMA_NAMES",
    "DocSettings",
    "IngestRequest",
    "check_upload",
    "doc_settings",
    "document_status",
    "ingest_document",
    "search_documents",
]
