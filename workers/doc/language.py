"""French or English? A stop-word vote, enough to pick the full-text configuration of a page.

Business documents are short and full of numbers, so the vote only decides with a clear
margin; otherwise the page is `und` (undetermined) and is indexed in both languages.
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


def detect(text: str, *, min_votes: int = 3, margin: float = 1.5) -> str:
    """`fr`, `en` or `und`."""
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
