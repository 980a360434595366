"""Rule-based extraction of commercial documents (invoices, quotes), French and English.

A field is found by its label (`Total TTC`, `Amount due`, `Échéance`...) and the value on the
same line after it, else on the next line; each result carries a confidence: high for a label
match on the same line, lower on the next line or for a fallback heuristic, raised when the
totals are consistent (net + VAT = gross) and lowered when they are not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from . import values

Line = tuple[int, str]  # (page, text)
IC = re.IGNORECASE


def rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, IC) for p in patterns)


@dataclass(frozen=True)
class Schema:
    name: str
    number: tuple[re.Pattern[str], ...]
    #: (field name, label patterns) of the dates besides the issue date.
    dates: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = field(default=())


ISSUE_DATE = rx(
    r"date\s+(?:de\s+(?:la\s+)?)?(?:facture|facturation|devis|d['’]\s?[ée]mission)",
    r"(?:invoice|quote|quotation|issue)\s+date",
    r"date\s+of\s+issue",
    r"^\s*date\b",
)
TOTAL_NET = rx(
    r"total\s+h\.?\s?t\.?\b",
    r"montant\s+h\.?\s?t\.?\b",
    r"sous[- ]total",
    r"sub[- ]?total",
    r"total\s+(?:excl\.?|excluding|before|net\s+of)\s+(?:vat|tax)",
    r"\bnet\s+amount",
    r"total\s+net\b",
)
TOTAL_GROSS = rx(
    r"total\s+t\.?\s?t\.?\s?c\.?",
    r"montant\s+t\.?\s?t\.?\s?c\.?",
    r"net\s+[àa]\s+payer",
    r"total\s+[àa]\s+payer",
    r"grand\s+total",
    r"total\s+(?:due|amount|incl\.?|including)",
    r"amount\s+due",
    r"balance\s+due",
    r"total\s+payable",
)
VAT_AMOUNT = rx(
    r"(?:total\s+|montant\s+(?:de\s+(?:la\s+)?)?)?\bt\.?v\.?a\.?\b(?!\s*(?:intra|n[°o]|non\s+applicable))",
    r"(?:total\s+)?\bvat\b(?!\s*(?:no\b|number|reg|id\b|#))",
    r"\bsales\s+tax\b",
    r"^\s*tax\b",
)
VAT_NUMBER = rx(
    r"tva\s+intra(?:communautaire)?",
    r"n[°o]\s*(?:de\s+)?tva",
    r"vat\s+(?:no\.?|number|reg(?:istration)?\.?(?:\s+no\.?)?|id)",
)
VAT_ID = re.compile(r"\b([A-Z]{2}\s?[0-9A-Z]{2}\s?[0-9A-Z]{3}\s?[0-9A-Z]{3}\s?[0-9A-Z]{0,5})\b")
SUPPLIER = rx(
    r"^\s*(?:fournisseur|[ée]metteur|vendeur|prestataire|supplier|vendor|seller|bill(?:ed)?\s+from|from)\s*:",
)
LEGAL_FORM = re.compile(
    r"\b(?:SAS|SASU|SARL|EURL|SA|SNC|SCI|Ltd|Limited|LLC|LLP|Inc|PLC|GmbH|BV|SRL)\b\.?"
)
NUMBER_VALUE = re.compile(r"[\s:#°.]*([A-Z0-9][A-Z0-9\-/_.]*\d[A-Z0-9\-/_]*)", IC)

INVOICE = Schema(
    name="invoice",
    number=rx(
        r"facture\s*(?:n[°o]\.?|num[ée]ro|#)",
        r"n[°o]\s*(?:de\s+)?facture",
        r"num[ée]ro\s+de\s+facture",
        r"invoice\s*(?:no\.?|number|num\.?|#|n°)",
        r"^\s*invoice\b(?=\s*:?\s*[A-Z]*-?\d)",
    ),
    dates=(
        (
            "due_date",
            rx(
                r"date\s+d['’]\s?[ée]ch[ée]ance",
                r"[ée]ch[ée]ance",
                r"[àa]\s+payer\s+(?:avant\s+le|au\s+plus\s+tard\s+le|le)",
                r"due\s+date",
                r"payment\s+due",
                r"due\s+(?:by|on)",
                r"pay\s+by",
            ),
        ),
    ),
)
QUOTE = Schema(
    name="quote",
    number=rx(
        r"devis\s*(?:n[°o]\.?|num[ée]ro|#)",
        r"n[°o]\s*(?:de\s+)?devis",
        r"num[ée]ro\s+de\s+devis",
        r"(?:quote|quotation|estimate)\s*(?:no\.?|number|#|ref\.?)",
        r"^\s*(?:quote|quotation|devis)\b(?=\s*:?\s*[A-Z]*-?\d)",
    ),
    dates=(
        (
            "valid_until",
            rx(
                r"valable\s+jusqu['’]\s?(?:au|à)",
                r"date\s+de\s+validit[ée]",
                r"validit[ée]",
                r"valid\s+(?:until|through|till)",
                r"expir(?:y|ation)\s+date",
                r"expires?\s+(?:on)?",
            ),
        ),
    ),
)
SCHEMAS = {schema.name: schema for schema in (INVOICE, QUOTE)}


def classify(lines: list[Line]) -> Schema:
    """`auto`: a quote when its head says devis/quote/estimate more than facture/invoice."""
    head = " ".join(text for _, text in lines[:40]).lower()
    quote = len(re.findall(r"\b(?:devis|quote|quotation|estimate)\b", head))
    invoice = len(re.findall(r"\b(?:facture|invoice)\b", head))
    return QUOTE if quote > invoice else INVOICE


Found = dict[str, Any]


def _labelled(
    lines: list[Line],
    labels: tuple[re.Pattern[str], ...],
    read: Callable[[str], Any],
    *,
    skip: tuple[re.Pattern[str], ...] = (),
) -> Found | None:
    """The value `read` finds after the first label (same line 0.9, next line 0.75)."""
    for pattern in labels:
        for i, (page, text) in enumerate(lines):
            if any(s.search(text) for s in skip):
                continue
            m = pattern.search(text)
            if m is None:
                continue
            value = read(text[m.end() :])
            if value is not None:
                return {"value": value, "confidence": 0.9, "page": page}
            if i + 1 < len(lines) and not pattern.search(lines[i + 1][1]):
                value = read(lines[i + 1][1])
                if value is not None:
                    return {"value": value, "confidence": 0.75, "page": lines[i + 1][0]}
    return None


def _last_amount(text: str) -> Decimal | None:
    found = values.amounts(text)
    return found[-1][0] if found else None


def _first_date(lang: str) -> Callable[[str], date | None]:
    def read(text: str) -> date | None:
        found = values.dates(text, lang)
        return found[0][0] if found else None

    return read


def _number(text: str) -> str | None:
    m = NUMBER_VALUE.match(text)
    return m.group(1).rstrip(".-/") if m else None


def _vat_id(text: str) -> str | None:
    m = VAT_ID.search(text.upper())
    return m.group(1).replace(" ", "") if m else None


def extract(text_pages: list[tuple[int, str]], schema_name: str, lang: str) -> dict[str, Any]:
    """Fields of the document `text_pages` [(page, text)] by `schema_name` (or `auto`)."""
    lines: list[Line] = [
        (page, line.strip())
        for page, text in text_pages
        for line in text.split("\n")
        if line.strip()
    ]
    schema = classify(lines) if schema_name == "auto" else SCHEMAS[schema_name]
    fields: dict[str, Found | None] = {}
    fields["number"] = _labelled(lines, schema.number, _number)
    read_date = _first_date(lang)
    fields["issue_date"] = _labelled(lines, ISSUE_DATE, read_date, skip=_other_date_labels(schema))
    if fields["issue_date"] is None:
        all_dates = [(d, page) for page, t in lines for d, _, _ in values.dates(t, lang)]
        if all_dates:
            fields["issue_date"] = {
                "value": all_dates[0][0],
                "confidence": 0.5,
                "page": all_dates[0][1],
            }
    for name, labels in schema.dates:
        fields[name] = _labelled(lines, labels, read_date)
    fields["total_net"] = _labelled(lines, TOTAL_NET, _last_amount)
    fields["total_gross"] = _labelled(lines, TOTAL_GROSS, _last_amount, skip=TOTAL_NET)
    fields["vat_amount"] = _labelled(lines, VAT_AMOUNT, _last_amount, skip=TOTAL_GROSS + TOTAL_NET)
    fields["total_gross"] = fields["total_gross"] or _plain_total(lines)
    fields["vat_rate"] = _vat_rate(lines)
    _check_totals(fields)
    fields["currency"] = _currency(lines, fields)
    found_ibans = [(iban, page) for page, t in lines for iban in values.ibans(t)]
    fields["iban"] = (
        {"value": found_ibans[0][0], "confidence": 0.99, "page": found_ibans[0][1]}
        if found_ibans
        else None
    )
    fields["vat_number"] = _labelled(lines, VAT_NUMBER, _vat_id)
    fields["supplier"] = _supplier(lines)
    result = {k: _jsonable(v) for k, v in fields.items() if v is not None}
    return {
        "schema": schema.name,
        "language": lang,
        "extractor": "rules/1",
        "fields": result,
        "missing": sorted(k for k, v in fields.items() if v is None),
    }


def _other_date_labels(schema: Schema) -> tuple[re.Pattern[str], ...]:
    return tuple(p for _, labels in schema.dates for p in labels)


def _vat_rate(lines: list[Line]) -> Found | None:
    for page, text in lines:
        if any(p.search(text) for p in VAT_AMOUNT) and (m := values.PERCENT.search(text)):
            rate = values.parse_amount(m.group(1))
            if rate is not None and Decimal(0) < rate < Decimal(100):
                return {"value": rate, "confidence": 0.9, "page": page}
    return None


def _check_totals(fields: dict[str, Found | None]) -> None:
    net, vat, gross = fields["total_net"], fields["vat_amount"], fields["total_gross"]
    if net and vat and gross:
        consistent = abs(net["value"] + vat["value"] - gross["value"]) <= Decimal("0.02")
        for f in (net, vat, gross):
            f["confidence"] = max(f["confidence"], 0.98) if consistent else f["confidence"] - 0.3
    elif net and vat and not gross:
        fields["total_gross"] = {
            "value": net["value"] + vat["value"],
            "confidence": 0.6,
            "derived": True,
        }


def _plain_total(lines: list[Line]) -> Found | None:
    """`Total ...` alone, the last resort for the gross total: the document's last such line."""
    for page, text in reversed(lines):
        if re.match(r"^\s*total\b", text, IC) and not any(
            p.search(text) for p in TOTAL_NET + VAT_AMOUNT
        ):
            amount = _last_amount(text)
            if amount is not None:
                return {"value": amount, "confidence": 0.6, "page": page}
    return None


def _currency(lines: list[Line], fields: dict[str, Found | None]) -> Found | None:
    total_pages = {f["page"] for f in fields.values() if f and "page" in f}
    near = [
        c
        for page, t in lines
        if page in total_pages and values.AMOUNT.search(t)
        for c in values.currencies(t)
    ]
    anywhere = [c for _, t in lines for c in values.currencies(t)]
    for found, confidence in ((near, 0.9), (anywhere, 0.6)):
        if found:
            best = max(sorted(set(found)), key=found.count)
            return {"value": best, "confidence": confidence}
    return None


def _supplier(lines: list[Line]) -> Found | None:
    for page, text in lines:
        for pattern in SUPPLIER:
            if (m := pattern.search(text)) and (name := text[m.end() :].strip(" :-")):
                return {"value": name[:200], "confidence": 0.9, "page": page}
    for page, text in lines[:30]:
        if LEGAL_FORM.search(text) and not re.search(
            r"\b(?:client|customer|bill\s+to)\b", text, IC
        ):
            return {"value": text[:200], "confidence": 0.7, "page": page}
    title = re.compile(r"^(?:facture|invoice|devis|quote|quotation|estimate|date)\b", IC)
    for page, text in lines[:10]:
        if not title.search(text) and re.search(r"[^\W\d_]{3}", text):
            return {"value": text[:200], "confidence": 0.4, "page": page}
    return None


def _jsonable(found: Found) -> Found:
    value = found["value"]
    if isinstance(value, Decimal):
        value = f"{value:.2f}"
    elif isinstance(value, date):
        value = value.isoformat()
    return {
        **found,
        "value": value,
        "confidence": round(max(0.05, min(1.0, found["confidence"])), 2),
    }
