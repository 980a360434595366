"""What an API or an operator shows for one document: its row, pages done/total, and the runs
of its jobs (`shared.jobs.runs.find` of the stable job ids)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from shared.jobs import catalog, runs
from workers.doc.contracts import DocIngestV1

from . import store

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


def ingest_job_id(org_id: UUID, document_id: UUID, file_object_id: UUID) -> str:
    payload = DocIngestV1(org_id=org_id, entity_id=document_id, file_object_id=file_object_id)
    return catalog.DOC_INGEST.job_id(payload)


def document_status(pool: ConnectionPool, document_id: UUID, org_id: UUID) -> dict[str, Any] | None:
    with pool.connection() as conn:
        doc = store.get_document(conn, document_id, org_id)
        if doc is None:
            return None
        methods: dict[str, int] = dict(
            conn.execute(
                "SELECT coalesce(method, status), count(*) FROM document_pages "
                "WHERE document_id = %s GROUP BY 1",
                (document_id,),
            ).fetchall()
        )
    job_id = ingest_job_id(org_id, document_id, doc.file_object_id)
    run = runs.find(job_id, org_id=org_id)
    return {
        "status": doc.status,
        "filename": doc.filename,
        "pages_done": doc.pages_done,
        "pages_total": doc.pages_total,
        "pages_failed": doc.pages_failed,
        "pages_by_method": methods,
        "language": doc.language,
        "error_code": doc.error_code,
        "error": doc.error,
        "ingest_job_id": job_id,
        "ingest_run": None
        if run is None
        else {
            "status": run.status,
            "progress": run.progress,
            "attempt": run.attempt,
            "error_code": run.error_code,
        },
        "extracted": doc.extracted,
        "created_at": doc.created_at,
        "finished_at": doc.finished_at,
    }
