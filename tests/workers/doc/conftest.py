from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from shared.config import RetryPolicy, Settings
from shared.jobs import catalog
from shared.jobs.send import SendResult
from shared.runtime import Runtime
from tests.support.inprocess import InProcessWorker, started_workers
from tests.support.wait import wait_for
from workers.doc import actors
from workers.doc.contracts import DocIngestV1
from workers.doc.settings import DocSettings, doc_settings
from workers.doc.source import Upload, upload
from workers.doc.wiring import DocServices, build_services, set_services

#: The doc policy (5 attempts) shrunk so that a retried page comes back within a second.
DOC_RETRY = RetryPolicy(max_attempts=3, min_backoff_ms=100, max_backoff_ms=400)


def worker_settings(settings: Settings, storage_root: Path, **extra: Any) -> Settings:
    """The kernel's settings of a test doc worker: the doc retry policy shrunk, local storage."""
    return settings.model_copy(
        update={
            "retries": {**settings.retries, "doc": DOC_RETRY},
            "storage_backend": "local",
            "storage_local_root": str(storage_root),
            **extra,
        }
    )


def worker_doc_settings(**extra: Any) -> DocSettings:
    """The doc settings of a test worker: pages rendered at 200 dpi for OCR (`extra`: fields)."""
    return doc_settings().model_copy(update={"ocr_dpi": 200, **extra})


class DocWorker(InProcessWorker):
    """An in-process doc worker (fleet middleware, real Redis and Postgres) on queue `doc`."""

    def __init__(self, settings: Settings, doc: DocSettings, **overrides: Any) -> None:
        super().__init__(settings, service="test-doc", bind=actors.bind, queues={"doc"})
        self.services: DocServices = build_services(self.runtime, doc, **overrides)

    # -- what a test does with it ---------------------------------------------------------

    def upload(
        self, data: bytes, *, org: uuid.UUID, filename: str = "doc.pdf", schema: str = "auto"
    ) -> Upload:
        with self.services.pool.connection() as conn:
            return upload(
                conn, self.services.storage, org, data, filename=filename, schema_name=schema
            )

    def ingest(self, up: Upload, org: uuid.UUID, *, unchecked: bool = False) -> SendResult:
        """`unchecked`: as a foreign producer sends it (no send-time check of the document row,
        which a Python send makes: shared/jobs/requires.py), to test the worker's own checks."""
        payload = DocIngestV1(
            org_id=org, entity_id=up.document_id, file_object_id=up.file_object_id
        )
        spec = dataclasses.replace(catalog.DOC_INGEST, requires=None) if unchecked else None
        return (spec or catalog.DOC_INGEST).send(payload)


def document(db: psycopg.Connection[Any], document_id: uuid.UUID) -> dict[str, Any]:
    cur = db.execute("SELECT * FROM documents WHERE id = %s", (document_id,))
    names = [c.name for c in cur.description or ()]
    row = cur.fetchone()
    assert row is not None, f"no document {document_id}"
    return dict(zip(names, row, strict=True))


def pages(db: psycopg.Connection[Any], document_id: uuid.UUID) -> list[dict[str, Any]]:
    cur = db.execute(
        "SELECT page, status, method, text, confidence, language, attempts, error "
        "FROM document_pages WHERE document_id = %s ORDER BY page",
        (document_id,),
    )
    names = [c.name for c in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def wait_document(
    db: psycopg.Connection[Any], document_id: uuid.UUID, *statuses: str, timeout: float = 30
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        row = document(db, document_id)
        return row if row["status"] in statuses else None

    return wait_for(probe, timeout=timeout, what=f"document {document_id} in {statuses}")


def runs_of(
    db: psycopg.Connection[Any], job_name: str, entity_id: uuid.UUID
) -> list[dict[str, Any]]:
    cur = db.execute(
        "SELECT job_id, status, attempt, error_code, error, progress, payload FROM job_runs "
        "WHERE job_name = %s AND entity_id = %s ORDER BY job_id",
        (job_name, str(entity_id)),
    )
    names = [c.name for c in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def settled_runs(
    db: psycopg.Connection[Any],
    job_name: str,
    entity_id: uuid.UUID,
    count: int,
    timeout: float = 15,
) -> list[dict[str, Any]]:
    """The `count` runs of `job_name` once every one is finished (the tracking middleware
    records an outcome just after the handler's own commit, so the document can be ahead)."""

    def probe() -> list[dict[str, Any]] | None:
        rows = runs_of(db, job_name, entity_id)
        finished = all(r["status"] in ("COMPLETED", "DEAD", "CANCELED") for r in rows)
        return rows if len(rows) == count and finished else None

    return wait_for(probe, timeout=timeout, what=f"{count} finished {job_name} runs")


@pytest.fixture
def make_doc_worker(
    runtime: Runtime, settings: Settings, tmp_path: Path
) -> Iterator[Callable[..., DocWorker]]:
    """Start a doc worker with kernel settings overrides (`settings_extra`), doc settings
    overrides (`doc=`) and service overrides."""
    with started_workers(
        install=lambda worker: set_services(worker.services), uninstall=lambda: set_services(None)
    ) as start:

        def make(
            settings_extra: dict[str, Any] | None = None,
            *,
            doc: dict[str, Any] | None = None,
            **overrides: Any,
        ) -> DocWorker:
            kernel = worker_settings(settings, tmp_path / "storage", **(settings_extra or {}))
            return start(DocWorker(kernel, worker_doc_settings(**(doc or {})), **overrides))

        yield make


@pytest.fixture
def doc_worker(make_doc_worker: Callable[..., DocWorker]) -> DocWorker:
    return make_doc_worker()


@pytest.fixture
def org() -> uuid.UUID:
    return uuid.uuid4()
