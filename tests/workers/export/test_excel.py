"""What a spreadsheet program gets: CSV with an optional UTF-8 byte order mark (Excel on Windows
opens BOM-less UTF-8 as ANSI), XLSX text cells exactly as the data (they cannot be formulas)."""

from __future__ import annotations

import codecs
import io
import uuid
import zipfile
from typing import Any

import psycopg
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from tests.workers.export.conftest import job_context, seed_ledger
from tests.workers.export.test_build import export_row, new_export
from tests.workers.export.test_formats import sheet_cells
from workers.export.build import build_export
from workers.export.cli import app
from workers.export.contracts import ExportParams
from workers.export.wiring import Exporter


def test_csv_with_bom_starts_with_the_utf8_byte_order_mark(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 10)
    plain = exporter.storage.read(
        build_export(new_export(db, org), job_context(org), exporter)["key"]
    )
    result = build_export(new_export(db, org, bom=True), job_context(org), exporter)
    marked = exporter.storage.read(result["key"])

    assert marked.startswith(codecs.BOM_UTF8 + b"entry_date,journal,")
    assert marked == codecs.BOM_UTF8 + plain, "the mark is the only difference"
    assert plain.startswith(b"entry_date,"), "no mark unless asked"
    assert "Écriture 3" in marked.decode("utf-8-sig")


def test_zip_with_bom_marks_its_csv_and_the_manifest_checksums_it(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    import hashlib
    import json

    org = uuid.uuid4()
    seed_ledger(db, org, 10)
    result = build_export(new_export(db, org, format="ZIP", bom=True), job_context(org), exporter)
    with zipfile.ZipFile(io.BytesIO(exporter.storage.read(result["key"]))) as archive:
        body = archive.read("accounting.csv")
        [entry] = json.loads(archive.read("manifest.json"))["files"]
    assert body.startswith(codecs.BOM_UTF8 + b"entry_date,")
    assert entry["sha256"] == hashlib.sha256(body).hexdigest() and entry["size_bytes"] == len(body)


@pytest.mark.parametrize("fmt", ["XLSX", "PDF"])
def test_bom_is_refused_for_formats_that_are_not_csv(fmt: str) -> None:
    with pytest.raises(ValidationError, match="bom applies to CSV and ZIP"):
        ExportParams.model_validate({"format": fmt, "bom": True})


def test_fleet_export_create_bom_requests_a_marked_csv(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    result = CliRunner().invoke(
        app, ["create", "ACCOUNTING", "--org", str(org), "--by", str(uuid.uuid4()), "--bom"]
    )
    assert result.exit_code == 0, result.output
    export_id = uuid.UUID(result.output.split()[1])
    assert export_row(db, export_id)["params"]["bom"] is True


def test_an_export_requested_before_the_bom_option_still_builds(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    # A row (and its queued job) written by the previous version has no `bom` in its params.
    org = uuid.uuid4()
    seed_ledger(db, org, 3)
    payload = new_export(db, org)
    db.execute("UPDATE exports SET params = params - 'bom' WHERE id = %s", (payload.entity_id,))
    result = build_export(payload, job_context(org), exporter)
    assert result["rows"] == 3 and export_row(db, payload.entity_id)["status"] == "COMPLETED"


def test_xlsx_text_cells_hold_the_data_unchanged(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 10)
    hostile = (
        '=HYPERLINK("http://x.test","pay")', "@SUM(A1:A9)", "-40 % remise", "+33 1 23",
        # A carriage return read back as itself by an XML reader that does not decode OOXML's
        # `_x000D_` (openpyxl's): before, '\r=1+1' came back '_x000D_=1+1' (issue 31).
        "\r=1+1", "two\r\nlines",
    )  # fmt: skip
    for label in hostile:
        db.execute(
            "INSERT INTO ledger_entries (org_id, entry_date, journal, account, label, debit, credit) "
            "VALUES (%s, '2026-01-01', 'OD', '4110', %s, 0, 1)",
            (org, label),
        )
    result = build_export(new_export(db, org, format="XLSX"), job_context(org), exporter)
    labels = [row[3] for row in sheet_cells(exporter.storage.read(result["key"]))[1:]]

    assert all(kind == "inlineStr" for kind, _ in labels), "text cells are strings, never formulas"
    texts = [text for _, text in labels]
    for label in hostile:
        assert label in texts, label
    assert not any(text.startswith("'") for text in texts), "no quote added to the data"
