"""`build_export` on real Postgres rows: content, org scoping, progress, cancel, retries."""

from __future__ import annotations

import csv
import hashlib
import io
import uuid
from datetime import date
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from shared.errors import JobCanceled, PermanentError
from shared.storage import StorageBackend
from tests.workers.export.conftest import Progress, job_context, seed_ledger
from workers.export import store
from workers.export.build import build_export
from workers.export.contracts import ExportBuildV2, ExportParams
from workers.export.wiring import Exporter


def new_export(
    db: psycopg.Connection[Any], org: uuid.UUID, type_: str = "ACCOUNTING", **params: Any
) -> ExportBuildV2:
    by = uuid.uuid4()
    model = ExportParams.model_validate(params)
    export_id = store.insert(
        db, org_id=org, requested_by=by, type=type_, params=model.model_dump(mode="json")
    )
    return ExportBuildV2(org_id=org, entity_id=export_id, requested_by=by, type=type_, params=model)


def export_row(db: psycopg.Connection[Any], export_id: uuid.UUID) -> dict[str, Any]:
    with db.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM exports WHERE id = %s", (export_id,)).fetchone()
    assert row is not None
    return row


def read_csv(storage: StorageBackend, key: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(storage.read(key).decode("utf-8"), newline="")))


def assert_nothing_left(storage: StorageBackend) -> None:
    assert storage.list_keys("orgs") == [], "an object was stored"
    assert storage.pending() == [], "a partial upload was left behind"


def test_csv_export_has_only_the_orgs_rows_in_range_and_filter_with_a_file_object(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org, other = uuid.uuid4(), uuid.uuid4()
    seed_ledger(db, org, 1_000)
    seed_ledger(db, other, 500)
    payload = new_export(
        db,
        org,
        date_range={"start": "2026-01-11", "end": "2026-01-20"},
        filters={"journal": "SALES"},
    )
    result = build_export(payload, job_context(org), exporter)

    expected = db.execute(
        "SELECT count(*) FROM ledger_entries WHERE org_id = %s AND journal = 'SALES' "
        "AND entry_date BETWEEN '2026-01-11' AND '2026-01-20'",
        (org,),
    ).fetchone()[0]
    rows = read_csv(exporter.storage, result["key"])
    assert rows[0] == [
        "entry_date",
        "journal",
        "account",
        "label",
        "debit",
        "credit",
        "currency",
        "reference",
    ]
    assert len(rows) - 1 == result["rows"] == expected > 0
    assert {r[1] for r in rows[1:]} == {"SALES"}
    assert all("2026-01-11" <= r[0] <= "2026-01-20" for r in rows[1:])
    assert result["key"].startswith(f"orgs/{org}/exports/{payload.entity_id}/")

    row = export_row(db, payload.entity_id)
    assert row["status"] == "COMPLETED" and row["row_count"] == expected
    data = exporter.storage.read(result["key"])
    fo = store.file_object(db, row["file_object_id"], org)
    assert fo is not None and fo.provider == "LOCAL" and fo.key == result["key"]
    assert fo.size_bytes == len(data) and fo.sha256 == hashlib.sha256(data).hexdigest()
    assert store.file_object(db, row["file_object_id"], other) is None, (
        "file objects are scoped by org"
    )


def test_csv_is_rfc4180_and_neutralises_formula_cells(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 10)
    db.execute(
        "INSERT INTO ledger_entries (org_id, entry_date, journal, account, label, debit, credit) VALUES "
        "(%s, '2026-01-01', 'OD', '4110', %s, 0, 12.5), (%s, '2026-01-01', 'OD', '4110', %s, 0, 1)",
        (org, "@SUM(A1:A9)", org, "\tcmd|' /C calc'!A0"),
    )
    result = build_export(new_export(db, org), job_context(org), exporter)
    raw = exporter.storage.read(result["key"])
    assert raw.startswith(b"entry_date,journal,") and b"\r\n" in raw
    rows = read_csv(exporter.storage, result["key"])
    labels = [r[3] for r in rows[1:]]
    assert (
        '\'=HYPERLINK("http://x.test","pay 5")' in labels
    )  # quotes doubled on disk, read back intact
    assert "'@SUM(A1:A9)" in labels and "'\tcmd|' /C calc'!A0" in labels
    assert 'Facture "n°1", payée' in labels and "line\r\nbreak 2" in labels
    assert not any(label[:1] in "=+-@\t\r" for label in labels if label)
    assert b'"=HYPERLINK' not in raw


def test_progress_is_reported_at_least_every_5_percent(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 50_000)
    progress = Progress()
    build_export(new_export(db, org), job_context(org, progress), exporter)
    done = [d for d, total, _ in progress.calls if total == 50_000]
    assert done[-1] == 50_000
    steps = [b - a for a, b in zip([0, *done], done, strict=False)]
    assert max(steps) <= 50_000 * 0.05, steps


def test_cancel_stops_within_one_interval_and_leaves_no_object(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 20_000)
    payload = new_export(db, org)
    progress = Progress(cancel_at=6_000)
    with pytest.raises(JobCanceled):
        build_export(payload, job_context(org, progress), exporter)
    last_done = progress.calls[-1][0]
    assert 6_000 <= last_done <= 6_000 + 20_000 * 0.05
    assert export_row(db, payload.entity_id)["status"] == "CANCELED"
    assert_nothing_left(exporter.storage)


class FailingWrites:
    """Wraps a backend so that writers fail after `after` bytes (a full disk, a broken pipe)."""

    def __init__(self, inner: StorageBackend, after: int) -> None:
        self.inner, self.after = inner, after

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def open_writer(self, key: str, content_type: str) -> Any:
        writer = self.inner.open_writer(key, content_type)
        real, limit = writer._write, self.after

        def write(data: memoryview) -> None:
            if writer.size > limit:
                raise OSError(28, "No space left on device")
            real(data)

        writer._write = write  # type: ignore[method-assign]
        return writer


def test_a_failed_attempt_leaves_nothing_and_the_retry_restarts_cleanly(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 20_000)
    payload = new_export(db, org, format="ZIP")
    real_storage = exporter.storage
    exporter.storage = FailingWrites(real_storage, after=100_000)  # type: ignore[assignment]
    first = Progress()
    with pytest.raises(OSError, match="No space"):
        build_export(payload, job_context(org, first, attempt=1), exporter)
    assert export_row(db, payload.entity_id)["status"] == "RETRYING"
    assert_nothing_left(real_storage)

    exporter.storage = real_storage
    checkpoint = [c for _, _, c in first.calls if c][-1]
    result = build_export(
        payload, job_context(org, Progress(), attempt=2, checkpoint=checkpoint), exporter
    )
    assert result["rows"] == 20_000 and export_row(db, payload.entity_id)["status"] == "COMPLETED"
    assert real_storage.list_keys("orgs") == [result["key"]] and real_storage.pending() == []


def test_the_retry_of_a_killed_attempt_discards_its_partial_object(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 3_000)
    payload = new_export(db, org)
    # A killed worker: its writer was never committed nor aborted, only its token checkpointed.
    dead = exporter.storage.open_writer(
        f"orgs/{org}/exports/{payload.entity_id}/accounting.csv", "text/csv"
    )
    dead.write(b"entry_date,journal\r\n2026-01-01,SA")
    checkpoint = {"export_id": str(payload.entity_id), "upload": dead.resume_token}
    assert len(exporter.storage.pending()) == 1

    result = build_export(payload, job_context(org, attempt=2, checkpoint=checkpoint), exporter)
    assert result["rows"] == 3_000
    assert exporter.storage.pending() == []
    dead._file.close()  # type: ignore[attr-defined]  (what the kernel does for a killed process)


def test_a_completed_export_is_not_built_twice(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 10)
    payload = new_export(db, org)
    build_export(payload, job_context(org), exporter)
    again = build_export(payload, job_context(org, attempt=2), exporter)
    assert again["already_done"] is True
    assert (
        db.execute("SELECT count(*) FROM file_objects WHERE org_id = %s", (org,)).fetchone()[0] == 1
    )


def test_another_orgs_export_is_not_found(exporter: Exporter, db: psycopg.Connection[Any]) -> None:
    org = uuid.uuid4()
    payload = new_export(db, org)
    stranger = payload.model_copy(update={"org_id": uuid.uuid4()})
    with pytest.raises(PermanentError) as err:
        build_export(stranger, job_context(stranger.org_id), exporter)
    assert err.value.code == "NOT_FOUND"
    assert export_row(db, payload.entity_id)["status"] == "PENDING"


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"filters": {"nope": "x"}}, "INVALID_FILTER"),
        ({"filters": {"journal": 3}}, "INVALID_FILTER"),
        ({"format": "PDF"}, "TOO_LARGE_FOR_PDF"),
    ],
)
def test_invalid_requests_fail_permanently_with_a_code(
    exporter: Exporter, db: psycopg.Connection[Any], params: dict[str, Any], code: str
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 30)
    exporter.settings = exporter.settings.model_copy(update={"pdf_max_rows": 20})
    payload = new_export(db, org, **params)
    with pytest.raises(PermanentError) as err:
        build_export(payload, job_context(org), exporter)
    assert err.value.code == code
    row = export_row(db, payload.entity_id)
    assert row["status"] == "FAILED" and row["error_code"] == code
    assert_nothing_left(exporter.storage)


def test_date_range_is_checked_by_the_contract() -> None:
    with pytest.raises(ValueError, match="end must not be before start"):
        ExportParams.model_validate(
            {"date_range": {"start": date(2026, 2, 1), "end": date(2026, 1, 1)}}
        )
