from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import date
from typing import Any

import psycopg
import pytest

from shared.config import RetryPolicy, Settings
from shared.jobs.context import JobContext
from shared.runtime import Runtime
from shared.storage.backends.local import LocalBackend
from tests.support.inprocess import InProcessWorker, started_workers
from tests.support.storage import local_storage, s3_server, s3_storage
from workers.export import actors
from workers.export.settings import ExportSettings
from workers.export.wiring import Exporter, build_exporter, set_exporter

# The storage backends (tests/support/storage.py), shared with the storage port's tests.
__all__ = ["local_storage", "s3_server", "s3_storage"]


@pytest.fixture
def exporter(runtime: Runtime, local_storage: LocalBackend) -> Exporter:
    settings = ExportSettings().model_copy(update={"fetch_rows": 2_000})
    return build_exporter(runtime, settings=settings, storage=local_storage)


class Progress:
    """What a handler's `job.progress` reported; cancels once `cancel_at` rows are done."""

    def __init__(self, cancel_at: int | None = None) -> None:
        self.calls: list[tuple[int, int, Any]] = []
        self.cancel_at = cancel_at

    def __call__(self, job_id: str, done: int, total: int, checkpoint: Any) -> bool:
        self.calls.append((done, total, checkpoint))
        return self.cancel_at is not None and done >= self.cancel_at


def job_context(
    org: uuid.UUID, progress: Progress | None = None, *, attempt: int = 1, checkpoint: Any = None
) -> JobContext:
    return JobContext(
        job_id=f"{org}:export:build:test",
        job_name="export:build",
        queue="export",
        org_id=org,
        attempt=attempt,
        max_attempts=3,
        message_id="m",
        checkpoint=checkpoint,
        _write_progress=progress or Progress(),
    )


def seed_ledger(
    db: psycopg.Connection[Any], org: uuid.UUID, n: int, *, start: date = date(2026, 1, 1)
) -> None:
    """`n` ledger rows over 100 days, with a few hostile labels (formula triggers, quotes, CR/LF)."""
    db.execute(
        """
        INSERT INTO ledger_entries (org_id, entry_date, journal, account, label, debit, credit, reference)
        SELECT %(org)s, %(start)s::date + (i %% 100), CASE WHEN i %% 2 = 0 THEN 'SALES' ELSE 'BANK' END,
               '4110' || (i %% 7), CASE i %% 5 WHEN 0 THEN '=HYPERLINK("http://x.test","pay ' || i || '")'
                                          WHEN 1 THEN 'Facture "n°' || i || '", payée'
                                          WHEN 2 THEN E'line\\r\\nbreak ' || i
                                          ELSE 'Écriture ' || i END,
               (i %% 1000) / 10.0, 0, 'REF-' || i
        FROM generate_series(1, %(n)s) AS i
        """,
        {"org": org, "start": start, "n": n},
    )


class ExportWorker(InProcessWorker):
    """An in-process export worker (fleet middleware, real Redis) consuming the `export` queue."""

    def __init__(self, settings: Settings, **exporter: Any) -> None:
        super().__init__(
            settings, service="test-export", bind=actors.bind, queues={"export"}, threads=2
        )
        self.exporter: Exporter = build_exporter(self.runtime, **exporter)


@pytest.fixture
def export_worker(
    runtime: Runtime, settings: Settings, local_storage: LocalBackend
) -> Iterator[ExportWorker]:
    fast = settings.model_copy(
        update={
            "retries": {
                **settings.retries,
                "export": RetryPolicy(max_attempts=3, min_backoff_ms=100, max_backoff_ms=200),
            }
        }
    )
    with started_workers(
        install=lambda worker: set_exporter(worker.exporter), uninstall=lambda: set_exporter(None)
    ) as start:
        yield start(ExportWorker(fast, storage=local_storage))
