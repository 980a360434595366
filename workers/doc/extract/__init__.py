"""Structured extraction by schema name: rule-based extractors (invoice, quote, auto)."""

from __future__ import annotations

from .rules import SCHEMAS, classify, extract

#: Names `doc:extract_structured` accepts (`auto` picks invoice or quote from the content).
SCHEMA_NAMES: tuple[str, ...] = (*SCHEMAS, "auto")

__all__ = ["SCHEMAS", "SCHEMA_NAMES", "classify", "extract"]
