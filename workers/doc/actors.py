"""Actors of the doc worker: parse (done by the binding), call the domain, return its result."""

from __future__ import annotations

from typing import Any

import dramatiq

from shared.contracts.doc import DocExtractStructuredV1, DocIndexSearchV1, DocIngestV1, DocOcrV1
from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import BoundJob, handler

from . import app as _app  # noqa: F401  (the worker's broker: boots before the handlers bind)
from .ingest import ingest
from .pages import process_page
from .search import index_search
from .structured import extract_structured
from .wiring import get_services


def handle_ingest(payload: DocIngestV1, job: JobContext) -> dict[str, Any]:
    return ingest(payload, job, get_services())


def handle_ocr(payload: DocOcrV1, job: JobContext) -> dict[str, Any]:
    return process_page(payload, job, get_services())


def handle_extract(payload: DocExtractStructuredV1, job: JobContext) -> dict[str, Any]:
    return extract_structured(payload, job, get_services())


def handle_index(payload: DocIndexSearchV1, job: JobContext) -> dict[str, Any]:
    return index_search(payload, job, get_services())


def bind(broker: dramatiq.Broker | None = None) -> dict[str, BoundJob[Any]]:
    """Bind the handlers to `broker` (default: the process's global broker); tests bind their own."""
    return {
        catalog.DOC_INGEST.name: handler(catalog.DOC_INGEST, broker=broker)(handle_ingest),
        catalog.DOC_OCR.name: handler(catalog.DOC_OCR, broker=broker)(handle_ocr),
        catalog.DOC_EXTRACT_STRUCTURED.name: handler(catalog.DOC_EXTRACT_STRUCTURED, broker=broker)(
            handle_extract
        ),
        catalog.DOC_INDEX_SEARCH.name: handler(catalog.DOC_INDEX_SEARCH, broker=broker)(
            handle_index
        ),
    }


_bound = bind()
ingest_document = _bound[catalog.DOC_INGEST.name]
ocr_page = _bound[catalog.DOC_OCR.name]
extract_document = _bound[catalog.DOC_EXTRACT_STRUCTURED.name]
index_document = _bound[catalog.DOC_INDEX_SEARCH.name]
