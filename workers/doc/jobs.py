"""The doc domain's jobs (DESIGN §2). Producers send them through `shared.jobs.catalog`
(`catalog.DOC_INGEST`, `catalog.get("doc:ingest")`); the worker binds its handlers to them."""

from __future__ import annotations

from shared.jobs.requires import Requires
from shared.jobs.spec import JobSpec

from . import contracts

#: A document's jobs need its stored bytes: only the upload creates its row.
_DOCUMENT = Requires("documents", made_by="the doc client's ingest_document")
DOC_INGEST = JobSpec(contracts.DOC_INGEST, queue="doc", entity_type="document", requires=_DOCUMENT)
DOC_OCR = JobSpec(contracts.DOC_OCR, queue="doc", entity_type="document", requires=_DOCUMENT)
DOC_EXTRACT_STRUCTURED = JobSpec(
    contracts.DOC_EXTRACT_STRUCTURED, queue="doc", entity_type="document", requires=_DOCUMENT
)
DOC_INDEX_SEARCH = JobSpec(
    contracts.DOC_INDEX_SEARCH, queue="doc", entity_type="document", requires=_DOCUMENT
)

JOBS = (DOC_INGEST, DOC_OCR, DOC_EXTRACT_STRUCTURED, DOC_INDEX_SEARCH)
