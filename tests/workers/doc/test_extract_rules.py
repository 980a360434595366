"""Pure units of the doc worker: values, rule-based fields, language vote, Tesseract TSV."""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal

import pytest

from workers.doc import language
from workers.doc.contracts import DOC_EXTRACT_STRUCTURED
from workers.doc.extract import extract
from workers.doc.extract.values import dates, ibans, parse_amount
from workers.doc.ocr import parse_tsv

from .pdfs import INVOICE_FR


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1 234,56", "1234.56"),
        ("1\u202f234,56", "1234.56"),
        ("1.234,56", "1234.56"),
        ("1,234.56", "1234.56"),
        ("1234.5", "1234.50"),
        ("120", "120.00"),
        ("12,000", "12000.00"),
    ],
)
def test_amounts_are_parsed_in_french_and_english_notation(raw: str, value: str) -> None:
    assert parse_amount(raw) == Decimal(value)


def test_dates_in_both_languages_and_ambiguous_numeric_dates() -> None:
    found = dates("le 1er avril 2024, March 5, 2024, 2024-06-30, 31.12.2024", "fr")
    assert [d for d, _, _ in found] == [
        date(2024, 4, 1),
        date(2024, 3, 5),
        date(2024, 6, 30),
        date(2024, 12, 31),
    ]
    assert dates("03/04/2024", "fr")[0][:1] == (date(2024, 4, 3),)
    assert dates("03/04/2024", "en")[0] == (date(2024, 3, 4), 0, True)  # US order, flagged
    assert dates("31/02/2024", "fr") == []


def test_only_ibans_with_a_valid_checksum_are_extracted() -> None:
    text = "IBAN FR76 3000 6000 0112 3456 7890 189 / FR76 3000 6000 0112 3456 7890 188"
    assert ibans(text) == ["FR7630006000011234567890189"]


def test_french_quote_by_auto_schema_has_validity_and_consistent_totals() -> None:
    text = (
        "Bâtiment Martin SAS\nDEVIS N° D-2024-17\nDate du devis : 2 février 2024\n"
        "Valable jusqu'au 3 mars 2024\nTotal HT 10 000,00 EUR\nTVA 10 % 1 000,00 EUR\n"
        "Total TTC 11 000,00 EUR"
    )
    result = extract([(1, text)], "auto", "fr")
    f = result["fields"]
    assert result["schema"] == "quote"
    assert (f["number"]["value"], f["valid_until"]["value"]) == ("D-2024-17", "2024-03-03")
    assert (f["total_net"]["value"], f["vat_amount"]["value"], f["total_gross"]["value"]) == (
        "10000.00", "1000.00", "11000.00",
    )  # fmt: skip
    assert f["total_gross"]["confidence"] >= 0.95
    assert f["supplier"]["value"] == "Bâtiment Martin SAS"
    assert "iban" in result["missing"] and "due_date" not in result["fields"]


def test_inconsistent_totals_lower_their_confidence() -> None:
    text = INVOICE_FR.replace("Total TTC : 1 440,00", "Total TTC : 1 999,00")
    fields = extract([(1, text)], "invoice", "fr")["fields"]
    assert fields["total_gross"]["value"] == "1999.00"
    assert fields["total_gross"]["confidence"] < 0.7


def test_fields_on_the_line_after_their_label_have_lower_confidence() -> None:
    text = "Invoice Number:\nINV-9\nTotal Due:\n$40.00"
    fields = extract([(3, text)], "invoice", "en")["fields"]
    assert fields["number"] == {"value": "INV-9", "confidence": 0.75, "page": 3}
    assert fields["total_gross"]["value"] == "40.00" and fields["currency"]["value"] == "USD"


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Le paiement est dû à trente jours pour la facture et le devis.", "fr"),
        ("The payment is due within thirty days of the invoice date.", "en"),
        ("FAC-2024-001 12/03/2024 1 440,00", "und"),
    ],
)
def test_language_vote(text: str, lang: str) -> None:
    assert language.detect(text) == lang


def test_tesseract_tsv_gives_lines_paragraphs_and_weighted_confidence() -> None:
    header = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
    rows = [
        "5\t1\t1\t1\t1\t1\t0\t0\t1\t1\t90\tFacture",
        "5\t1\t1\t1\t1\t2\t0\t0\t1\t1\t60\tn°",
        "5\t1\t1\t1\t2\t1\t0\t0\t1\t1\t80\tTotal",
        "5\t1\t1\t2\t1\t1\t0\t0\t1\t1\t-1\t ",
        "5\t1\t1\t2\t1\t2\t0\t0\t1\t1\t70\tIBAN",
    ]
    result = parse_tsv("\n".join([header, *rows]))
    assert result.text == "Facture n°\nTotal\n\nIBAN"
    assert result.words == 4
    assert result.confidence == pytest.approx(
        (90 * 7 + 60 * 2 + 80 * 5 + 70 * 4) / 18 / 100, abs=1e-4
    )


def test_extract_structured_payload_survives_the_wire_under_its_alias() -> None:
    payload = DOC_EXTRACT_STRUCTURED.build(
        {"org_id": uuid.uuid4(), "entity_id": uuid.uuid4(), "schema": "quote"}
    )
    assert payload.wire()["schema"] == "quote" and "schema_name" not in payload.wire()
    assert DOC_EXTRACT_STRUCTURED.parse(payload.wire()) == payload
