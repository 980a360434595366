"""Parsing the values business documents carry: amounts (FR `1 234,56`, EN `1,234.56`), dates
(numeric, ISO, French and English month names), currencies and IBANs (ISO 13616 mod-97)."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation

# -- Amounts ---------------------------------------------------------------------------------

_GROUP = r"[ \u00a0\u202f.,']"
AMOUNT = re.compile(
    rf"(?<![\w.,/-])-?(?:\d{{1,3}}(?:{_GROUP}\d{{3}})+(?:[.,]\d{{1,2}})?|\d+(?:[.,]\d{{1,2}})?)"
    r"(?![\d/]|[.,\-]\d)(?!\s?%)"
)


def parse_amount(raw: str) -> Decimal | None:
    """`1 234,56`, `1.234,56`, `1,234.56`, `1234.5`, `120` -> Decimal; None when not a number."""
    s = re.sub(r"[ \u00a0\u202f']", "", raw.strip())
    if not s:
        return None
    last = max(s.rfind(","), s.rfind("."))
    if last >= 0 and len(s) - last - 1 in (1, 2):
        whole, frac = s[:last], s[last + 1 :]
        s = re.sub(r"[.,]", "", whole) + "." + frac
    else:
        s = re.sub(r"[.,]", "", s)
    try:
        return Decimal(s).quantize(Decimal("0.01"))
    except InvalidOperation:
        return None


def amounts(text: str) -> list[tuple[Decimal, int]]:
    """Every amount in `text` (percentages excluded) with its position."""
    found = []
    for m in AMOUNT.finditer(text):
        value = parse_amount(m.group(0))
        if value is not None:
            found.append((value, m.start()))
    return found


PERCENT = re.compile(r"(\d{1,2}(?:[.,]\d{1,2})?)\s?%")

# -- Currencies ------------------------------------------------------------------------------

CURRENCY = re.compile(r"€|\$|£|\b(?:EUR|USD|GBP|CHF|CAD)\b|\beuros?\b", re.IGNORECASE)
_SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP", "euro": "EUR", "euros": "EUR"}


def currencies(text: str) -> list[str]:
    return [_SYMBOLS.get(m.group(0).lower(), m.group(0).upper()) for m in CURRENCY.finditer(text)]


# -- Dates -----------------------------------------------------------------------------------

FR_MONTHS = {
    "janvier": 1, "février": 2, "fevrier": 2, "mars": 3, "avril": 4, "mai": 5, "juin": 6,
    "juillet": 7, "août": 8, "aout": 8, "septembre": 9, "octobre": 10, "novembre": 11,
    "décembre": 12, "decembre": 12,
}  # fmt: skip
EN_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
_FR = "|".join(sorted(FR_MONTHS, key=len, reverse=True))
_EN = "|".join(sorted(EN_MONTHS, key=len, reverse=True))
ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
NUM_DATE = re.compile(r"\b(\d{1,2})[/.\-](\d{1,2})[/.\-](\d{4}|\d{2})\b")
FR_DATE = re.compile(rf"\b(\d{{1,2}})(?:er)?\s+({_FR})\s+(\d{{4}})\b", re.IGNORECASE)
EN_DAY_MONTH = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_EN})\.?,?\s+(\d{{4}})\b", re.IGNORECASE
)
EN_MONTH_DAY = re.compile(
    rf"\b({_EN})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.IGNORECASE
)


def _date(y: int, m: int, d: int) -> date | None:
    if y < 100:
        y += 2000
    try:
        return date(y, m, d)
    except ValueError:
        return None


def dates(text: str, lang: str) -> list[tuple[date, int, bool]]:
    """Every date in `text`: (date, position, ambiguous). Numeric dates are day-first, except
    in English when only month-first is valid or the text is English and both are (US usage is
    then assumed and the date is flagged ambiguous)."""
    found: list[tuple[date, int, bool]] = []
    for m in ISO_DATE.finditer(text):
        if (d := _date(int(m[1]), int(m[2]), int(m[3]))) is not None:
            found.append((d, m.start(), False))
    for m in NUM_DATE.finditer(text):
        a, b, y = int(m[1]), int(m[2]), int(m[3])
        day_first, month_first = _date(y, b, a), _date(y, a, b)
        if day_first and month_first and a != b:
            chosen = month_first if lang == "en" else day_first
            found.append((chosen, m.start(), lang == "en"))
        elif day_first or month_first:
            found.append((day_first or month_first, m.start(), False))  # type: ignore[arg-type]
    for m in FR_DATE.finditer(text):
        if (d := _date(int(m[3]), FR_MONTHS[m[2].lower()], int(m[1]))) is not None:
            found.append((d, m.start(), False))
    for m in EN_DAY_MONTH.finditer(text):
        if (d := _date(int(m[3]), EN_MONTHS[m[2].lower()], int(m[1]))) is not None:
            found.append((d, m.start(), False))
    for m in EN_MONTH_DAY.finditer(text):
        if (d := _date(int(m[3]), EN_MONTHS[m[1].lower()], int(m[2]))) is not None:
            found.append((d, m.start(), False))
    return sorted(found, key=lambda item: item[1])


# -- IBAN ------------------------------------------------------------------------------------

IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b")
#: ISO 13616 lengths of common countries (others: 15..34).
IBAN_LENGTHS = {"FR": 27, "DE": 22, "GB": 22, "ES": 24, "IT": 27, "BE": 16, "NL": 18, "CH": 21,
                "LU": 20, "PT": 25, "IE": 22, "MC": 27, "AT": 20}  # fmt: skip


def valid_iban(candidate: str) -> str | None:
    """The compact IBAN when its length and mod-97 check digits are right, else None."""
    iban = candidate.replace(" ", "").upper()
    expected = IBAN_LENGTHS.get(iban[:2])
    if (expected and len(iban) != expected) or not 15 <= len(iban) <= 34:
        return None
    digits = "".join(str(int(c, 36)) for c in iban[4:] + iban[:4])
    return iban if int(digits) % 97 == 1 else None


def ibans(text: str) -> list[str]:
    return [iban for m in IBAN.finditer(text) if (iban := valid_iban(m.group(0)))]
