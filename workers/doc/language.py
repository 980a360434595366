"""French or English? A stop-word vote, enough to pick the full-text configuration of a page.

Business documents are short and full of numbers, so the vote only decides with a clear
margin; otherwise the page is `und` (undetermined) and is indexed in both languages.

Text written mostly in a CJK script is told by its script first (a stop-word vote cannot see
it: a Japanese manual with a few English words was `en`): kana make it `ja`, hangul `ko`, Han
characters alone `zh`. Those pages are indexed like `und` (Postgres has no configuration for
them; its parser keeps their runs as words).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

FRENCH = frozenset(
    [
        "le",
        "la",
        "les",
        "un",
        "une",
        "des",
        "du",
        "de",
        "au",
        "aux",
        "et",
        "ou",
        "est",
        "sont",
        "pour",
        "par",
        "sur",
        "dans",
        "avec",
        "sans",
        "ce",
        "cette",
        "ces",
        "qui",
        "que",
        "quoi",
        "dont",
        "nous",
        "vous",
        "ils",
        "elles",
        "leur",
        "leurs",
        "notre",
        "votre",
        "pas",
        "plus",
        "total",
        "montant",
        "date",
        "facture",
        "devis",
        "échéance",
        "tva",
        "ht",
        "ttc",
        "règlement",
        "paiement",
        "fournisseur",
        "client",
        "prix",
        "quantité",
        "désignation",
        "numéro",
        "objet",
        "conditions",
        "jours",
        "net",
        "à",
        "été",
        "être",
        "avoir",
    ]
)
ENGLISH = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "is",
        "are",
        "for",
        "by",
        "on",
        "in",
        "with",
        "without",
        "this",
        "that",
        "these",
        "those",
        "which",
        "who",
        "what",
        "we",
        "you",
        "they",
        "their",
        "our",
        "your",
        "not",
        "more",
        "total",
        "amount",
        "date",
        "invoice",
        "quote",
        "due",
        "vat",
        "tax",
        "payment",
        "supplier",
        "customer",
        "price",
        "quantity",
        "description",
        "number",
        "subject",
        "terms",
        "days",
        "net",
        "of",
        "to",
        "be",
        "been",
        "have",
        "from",
        "bill",
    ]
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)

#: Postgres text search configuration of each language.
TS_CONFIG = {"fr": "french", "en": "english"}


#: Letters of each script (kana: hiragana, katakana and their extensions; Han: the unified
#: ideographs and extension A; hangul: syllables and jamo).
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_HANGUL = re.compile("[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)


def cjk(text: str) -> str | None:
    """`ja`, `ko` or `zh` when most letters of `text` are of a CJK script, else None."""
    kana, han, hangul = (len(pattern.findall(text)) for pattern in (_KANA, _HAN, _HANGUL))
    script = kana + han + hangul
    if script < 2 or script * 2 < len(_LETTER.findall(text)):
        return None
    if hangul >= kana + han:
        return "ko"
    return "ja" if kana else "zh"


def detect(text: str, *, min_votes: int = 3, margin: float = 1.5) -> str:
    """`fr`, `en`, `ja`, `ko`, `zh` or `und`."""
    script = cjk(text)
    if script is not None:
        return script
    fr = en = 0
    for word in _WORD.findall(text.lower()):
        if word in FRENCH:
            fr += 1
        if word in ENGLISH:
            en += 1
    if fr + en < min_votes:
        return "und"
    if fr >= en * margin:
        return "fr"
    if en >= fr * margin:
        return "en"
    return "und"


def majority(languages: Iterable[str]) -> str:
    """The document's language from its pages' (ignoring `und`)."""
    counts: dict[str, int] = {}
    for lang in languages:
        if lang != "und":
            counts[lang] = counts.get(lang, 0) + 1
    if not counts:
        return "und"
    return max(sorted(counts), key=lambda k: counts[k])
