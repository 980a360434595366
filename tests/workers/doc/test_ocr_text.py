"""What OCR and language detection make of a page (issue 31): a word hyphenated at a line end is
joined, a capitalised continuation keeps its hyphen, and a Japanese manual is `ja`, not `en`.

Before: Tesseract's "docu-" / "ment" stayed two halves (a search for "document" missed the
page), and a Japanese manual with a few English words was detected `en`.
"""

from __future__ import annotations

import pytest

from workers.doc import language
from workers.doc.demo import scanned_pdf
from workers.doc.ocr import Tesseract, join_hyphenated
from workers.doc.pdf import normalize, render_png

SCAN = """Le contrat de mainte-
nance est signé par
Jean-
Pierre Martin le 3 mars."""


def test_a_scanned_word_hyphenated_at_a_line_end_is_read_whole() -> None:
    image = render_png(scanned_pdf(SCAN), 1, 200)
    text = normalize(Tesseract().recognize(image).text)
    assert "maintenance" in text, text
    assert "mainte-" not in text
    assert "Jean-" in text and "JeanPierre" not in text, text  # a capital: a name, kept


@pytest.mark.parametrize(
    ("text", "joined"),
    [
        ("docu-\nment", "document"),
        ("docu- \n  ment", "document"),
        ("Jean-\nPierre", "Jean-\nPierre"),
        ("pages 12-\n14", "pages 12-\n14"),
        ("a dash -\nthen", "a dash -\nthen"),
        ("para-\n\nnext", "para-\n\nnext"),  # a paragraph break is no line break
    ],
)
def test_line_end_hyphens_join_only_a_lowercase_continuation(text: str, joined: str) -> None:
    assert join_hyphenated(text) == joined


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        (
            "本製品の取扱説明書です。ご使用の前に必ずお読みください。Model XR-200, power supply 12 V",
            "ja",
        ),
        ("产品说明书 使用前请仔细阅读 中文标签", "zh"),
        ("한국어 사용 설명서입니다. 사용 전에 읽어 주십시오.", "ko"),
        ("The invoice is due and the total amount is net of tax", "en"),
        ("Facture : le montant total est dû à la date de la facture", "fr"),
        ("A few words 日本", "und"),
    ],
)
def test_language_is_told_by_script_before_stop_words(text: str, lang: str) -> None:
    assert language.detect(text) == lang
