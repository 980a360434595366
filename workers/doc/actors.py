"""Actors of the doc worker: parse (done by the binding), call the domain, return its result."""

from __future__ import annotations

from functools import partial
from typing import Any

from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import Handler, bind_handlers
from shared.jobs.spec import JobSpec
from workers.doc.contracts import DocExtractStructuredV1, DocIndexSearchV1, DocIngestV1, DocOcrV1

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


#: By job declaration; `app` binds them to the worker's broker (importing this boots nothing).
HANDLERS: dict[JobSpec[Any], Handler[Any]] = {
    catalog.DOC_INGEST: handle_ingest,
    catalog.DOC_OCR: handle_ocr,
    catalog.DOC_EXTRACT_STRUCTURED: handle_extract,
    catalog.DOC_INDEX_SEARCH: handle_index,
}

#: Bind them to a broker (default: the process's global one): `app`, or a test's own.
bind = partial(bind_handlers, HANDLERS)
