"""XLSX, PDF and ZIP read back; the other export types over their real tables."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import psycopg
import pytest
import structlog.testing

from shared.errors import PermanentError
from tests.workers.export.conftest import job_context, seed_ledger
from tests.workers.export.test_build import new_export, read_csv
from workers.export import registry
from workers.export.build import build_export
from workers.export.registry import Column, ExportType
from workers.export.wiring import Exporter

NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}


def sheet_cells(data: bytes) -> list[list[tuple[str, str]]]:
    """(type, text) of each cell of the first sheet, row by row."""
    from xml.etree import ElementTree

    with zipfile.ZipFile(io.BytesIO(data)) as book:
        root = ElementTree.fromstring(book.read("xl/worksheets/sheet1.xml"))
    rows = []
    for row in root.iterfind(".//m:sheetData/m:row", NS):
        cells = []
        for c in row.iterfind("m:c", NS):
            text = "".join(t.text or "" for t in c.iterfind(".//m:t", NS)) or (
                c.findtext("m:v", "", NS)
            )
            cells.append((c.get("t", "n"), text))
        rows.append(cells)
    return rows


def pdf_text(data: bytes) -> list[str]:
    """The text of each page as a reader extracts it (PDFium)."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(data)
    try:
        return [str(page.get_textpage().get_text_range()) for page in doc]
    finally:
        doc.close()


def test_xlsx_keeps_numbers_numeric_and_text_as_strings(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 20)
    result = build_export(new_export(db, org, format="XLSX"), job_context(org), exporter)
    data = exporter.storage.read(result["key"])
    rows = sheet_cells(data)
    assert [text for _, text in rows[0]][:4] == ["entry_date", "journal", "account", "label"]
    assert len(rows) == 21
    labels = [r[3] for r in rows[1:]]
    assert all(kind == "inlineStr" for kind, _ in labels), "text is never a formula"
    assert '=HYPERLINK("http://x.test","pay 5")' in [text for _, text in labels]
    with zipfile.ZipFile(io.BytesIO(data)) as book:
        assert b"<f>" not in book.read("xl/worksheets/sheet1.xml"), "no cell holds a formula"
    assert rows[1][0][0] == "n" and rows[1][4][0] == "n", "dates and amounts are numbers"


def test_pdf_report_has_pages_header_totals(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 300)
    result = build_export(
        new_export(db, org, format="PDF", filters={"journal": ["SALES", "BANK"]}),
        job_context(org),
        exporter,
    )
    data = exporter.storage.read(result["key"])
    assert data.startswith(b"%PDF-") and result["pages"] > 1
    expected = db.execute(
        "SELECT sum(debit) FROM ledger_entries WHERE org_id = %s", (org,)
    ).fetchone()[0]
    assert result["totals"] == {"debit": str(expected), "credit": "0.00"}
    text = "\n".join(pdf_text(data))
    for needle in ("Accounting ledger", "Total: 300 rows", str(expected), "journal = ", "Page 2/"):
        assert needle in text, needle


#: French accounting labels and other scripts: none of these is in Latin-1.
UNICODE_LABELS = (
    "Acompte 500 € — cœur d’activité",
    "Œuvres sociales – « prime » …",
    "Ζήτα Ελλάδα · Счёт №42 · Łódź ŠKODA",
)


def test_pdf_prints_every_character_of_the_data(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    for label in UNICODE_LABELS:
        db.execute(
            "INSERT INTO ledger_entries (org_id, entry_date, journal, account, label, debit, credit) "
            "VALUES (%s, '2026-01-02', 'ŒUVRES', '6470', %s, 12.5, 0)",
            (org, label),
        )
    payload = new_export(db, org, format="PDF", filters={"journal": "ŒUVRES"})
    result = build_export(payload, job_context(org), exporter)

    [page] = pdf_text(exporter.storage.read(result["key"]))
    text = " ".join(page.split())
    for label in UNICODE_LABELS:
        assert label in text, (label, text)
    assert 'journal = "ŒUVRES"' in text and "?" not in text
    assert result["font"] == "DejaVuSans"


CJK_LABELS = ("日本語のラベル", "中文标签", "한국어 라벨")


def test_pdf_prints_cjk_from_the_fallback_font_and_marks_what_no_font_has(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    """Before: `日本語のラベル 中文标签` printed as an empty cell (DejaVu lacks them) and the
    export was COMPLETED without a word (issue 31)."""
    org = uuid.uuid4()
    tangut = "\U00017001"  # in no font of the machine
    for label in (*CJK_LABELS, f"glyph {tangut} here"):
        db.execute(
            "INSERT INTO ledger_entries (org_id, entry_date, journal, account, label, debit, credit) "
            "VALUES (%s, '2026-01-02', 'CJK', '6470', %s, 1, 0)",
            (org, label),
        )
    with structlog.testing.capture_logs() as logs:
        result = build_export(
            new_export(db, org, format="PDF", filters={"journal": "CJK"}),
            job_context(org),
            exporter,
        )

    [page] = pdf_text(exporter.storage.read(result["key"]))
    text = " ".join(page.split())
    for label in CJK_LABELS:
        assert label in text, (label, text)
    assert "glyph \ufffd here" in text  # a visible mark, not nothing
    [warning] = result["warnings"]
    assert "1 character(s)" in warning and tangut in warning
    assert [e["count"] for e in logs if e["event"] == "export.pdf_glyphs_missing"] == [1]


def test_pdf_without_its_font_file_falls_back_to_latin1_helvetica(
    exporter: Exporter, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 5)
    exporter.settings = exporter.settings.model_copy(
        update={"pdf_font": str(tmp_path / "absent.ttf")}
    )
    with structlog.testing.capture_logs() as logs:
        result = build_export(new_export(db, org, format="PDF"), job_context(org), exporter)
    assert result["font"] == "Helvetica" and result["rows"] == 5
    assert "Écriture 3" in " ".join(pdf_text(exporter.storage.read(result["key"])))
    assert [e["path"] for e in logs if e["event"] == "export.pdf_font_missing"] == [
        str(tmp_path / "absent.ttf")
    ]


def test_zip_has_the_csv_and_a_manifest_with_count_and_checksum(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    seed_ledger(db, org, 1_234)
    result = build_export(new_export(db, org, format="ZIP"), job_context(org), exporter)
    with zipfile.ZipFile(io.BytesIO(exporter.storage.read(result["key"]))) as archive:
        assert archive.testzip() is None
        manifest = json.loads(archive.read("manifest.json"))
        body = archive.read("accounting.csv")
    (entry,) = manifest["files"]
    assert entry["rows"] == 1_234 and entry["name"] == "accounting.csv"
    assert entry["sha256"] == hashlib.sha256(body).hexdigest() and entry["size_bytes"] == len(body)
    assert body.count(b"\r\n") >= 1_235


def test_job_runs_export_lists_only_the_orgs_runs(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org, other = uuid.uuid4(), uuid.uuid4()
    for owner, n in ((org, 3), (other, 2)):
        for i in range(n):
            db.execute(
                "INSERT INTO job_runs (org_id, job_name, job_id, queue, status) VALUES (%s, 'email:send', %s, 'email', %s)",
                (owner, f"{owner}:email:send:{i}", "COMPLETED" if i else "DEAD"),
            )
    result = build_export(
        new_export(db, org, "JOB_RUNS", filters={"status": "COMPLETED"}), job_context(org), exporter
    )
    rows = read_csv(exporter.storage, result["key"])
    assert sorted(r[0] for r in rows[1:]) == [f"{org}:email:send:1", f"{org}:email:send:2"]


def test_emails_export_reads_scheduled_emails(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    db.execute(
        "INSERT INTO scheduled_emails (org_id, template_key, lang, recipient_email, status) "
        "VALUES (%s, 'otp-code', 'en', 'A@Example.com', 'SENT'), (%s, 'otp-code', 'en', 'b@example.com', 'FAILED')",
        (org, org),
    )
    payload = new_export(db, org, "EMAILS", filters={"recipient_email": "a@example.COM"})
    rows = read_csv(exporter.storage, build_export(payload, job_context(org), exporter)["key"])
    assert [(r[3], r[4]) for r in rows[1:]] == [("A@Example.com", "SENT")]


def _table_exists(db: psycopg.Connection[Any], name: str) -> bool:
    return db.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()[0]


def test_an_export_whose_table_does_not_exist_yet_fails_clearly(
    exporter: Exporter, db: psycopg.Connection[Any], request: pytest.FixtureRequest
) -> None:
    # Before the indexer's migration (issue 5) LOTTERY_* were in this state; a type over a
    # table that no migration creates shows the same path on any database.
    if "TEST_NO_TABLE" not in registry.names():
        registry.register(
            ExportType(
                "TEST_NO_TABLE",
                "t",
                "export_test_absent",
                "export_test_absent",
                (Column("a", "a"),),
                "a",
            )
        )
        request.addfinalizer(lambda: registry.unregister("TEST_NO_TABLE"))
    org = uuid.uuid4()
    with pytest.raises(PermanentError, match="table export_test_absent does not exist yet") as err:
        build_export(new_export(db, org, "TEST_NO_TABLE"), job_context(org), exporter)
    assert err.value.code == "SOURCE_MISSING"


def test_lottery_tickets_export_reads_the_projection(
    exporter: Exporter, db: psycopg.Connection[Any]
) -> None:
    created = not _table_exists(db, "lottery_tickets")
    if created:  # the minimal projection the export expects (issue 5 ships the real one)
        db.execute(
            "CREATE TABLE lottery_tickets (org_id uuid NOT NULL, round_id bigint, player text, ticket_count int, "
            "amount_wei numeric(78,0), chain_id bigint, contract text, tx_hash text, log_index int, "
            "block_number bigint, block_time timestamptz)"
        )
    try:
        org = uuid.uuid4()
        player = "0x" + "ab" * 20
        db.execute(
            "INSERT INTO lottery_tickets (org_id, round_id, player, ticket_count, amount_wei, chain_id, contract, "
            "tx_hash, log_index, block_number, block_time) "
            "VALUES (%s, 1, %s, 3, 30000000000000000000, 31337, '0x' || repeat('c', 40), '0xfeed', 0, 12, now())",
            (org, player),
        )
        payload = new_export(
            db,
            org,
            "LOTTERY_TICKETS",
            filters={"round_id": 1, "player": player.upper()[2:].join(["0x", ""])},
        )
        rows = read_csv(exporter.storage, build_export(payload, job_context(org), exporter)["key"])
        assert rows[1][:4] == ["1", player, "3", "30000000000000000000"]
    finally:
        if created:
            db.execute("DROP TABLE lottery_tickets")
