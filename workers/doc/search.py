"""Full-text search over document pages (Postgres tsvector, French and English).

Each page is indexed in its own language: `tsv_fr` (config `french`) for French pages, `tsv_en`
(`english`) for English ones, both for undetermined pages; each column has a GIN index. A query
is parsed in both languages (`websearch_to_tsquery`: quotes, `or`, `-word`) and matches a page
through the column of its language, so both indexes serve it (a BitmapOr). Pages are ranked by
`ts_rank_cd`, documents by their best page, and snippets come from `ts_headline`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg

from shared.errors import PermanentError
from shared.jobs.context import JobContext
from workers.doc.contracts import DocIndexSearchV1

from . import store
from .wiring import DocServices

INDEX_PAGES = """
UPDATE document_pages
SET tsv_fr = CASE WHEN language <> 'en' THEN to_tsvector('french', coalesce(text, '')) END,
    tsv_en = CASE WHEN language <> 'fr' THEN to_tsvector('english', coalesce(text, '')) END
WHERE document_id = %s AND org_id = %s AND status = 'DONE'
"""


def index_document(conn: psycopg.Connection[Any], document_id: UUID, org_id: UUID) -> int:
    """(Re)build the tsvectors of the document's pages; returns the pages indexed."""
    return conn.execute(INDEX_PAGES, (document_id, org_id)).rowcount


def index_search(
    payload: DocIndexSearchV1, job: JobContext, services: DocServices
) -> dict[str, Any]:
    """`doc:index_search`: index every DONE page, then mark the document indexed."""
    with services.pool.connection() as conn:
        if store.get_document(conn, payload.entity_id, payload.org_id) is None:
            raise PermanentError(f"document {payload.entity_id} not found", code="NOT_FOUND")
        conn.execute("SET LOCAL synchronous_commit TO on")
        pages = index_document(conn, payload.entity_id, payload.org_id)
        store.mark_indexed(conn, payload.entity_id)
    return {"pages_indexed": pages}


SEARCH = """
WITH q AS (
    SELECT websearch_to_tsquery('french', %(q)s) AS fr, websearch_to_tsquery('english', %(q)s) AS en
), hits AS (
    SELECT p.document_id, p.page, p.text,
           greatest(coalesce(ts_rank_cd(p.tsv_fr, q.fr, 1), 0),
                    coalesce(ts_rank_cd(p.tsv_en, q.en, 1), 0)) AS rank,
           CASE WHEN p.tsv_fr @@ q.fr THEN 'french' ELSE 'english' END::regconfig AS cfg
    FROM document_pages p, q
    WHERE p.org_id = %(org)s AND (p.tsv_fr @@ q.fr OR p.tsv_en @@ q.en)
    ORDER BY rank DESC, p.document_id, p.page
    LIMIT %(max_pages)s
)
SELECT h.document_id, d.filename, d.status, h.page, h.rank,
       ts_headline(h.cfg, h.text, CASE WHEN h.cfg = 'french'::regconfig THEN q.fr ELSE q.en END,
                   'MaxFragments=2, MinWords=5, MaxWords=20, StartSel=«, StopSel=», FragmentDelimiter= … ')
FROM hits h JOIN documents d ON d.id = h.document_id AND d.org_id = %(org)s, q
ORDER BY h.rank DESC, h.document_id, h.page
"""


@dataclass(frozen=True)
class PageHit:
    page: int
    rank: float
    snippet: str


@dataclass
class DocumentHit:
    document_id: UUID
    filename: str | None
    status: str
    rank: float
    pages: list[PageHit] = field(default_factory=list)


def search(
    conn: psycopg.Connection[Any],
    org_id: UUID,
    query: str,
    *,
    limit: int = 10,
    pages_per_document: int = 3,
    max_pages: int = 500,
) -> list[DocumentHit]:
    """Documents of `org_id` matching `query`, best first, each with its best pages."""
    if not query.strip():
        return []
    rows = conn.execute(SEARCH, {"q": query, "org": org_id, "max_pages": max_pages}).fetchall()
    documents: dict[UUID, DocumentHit] = {}
    for doc_id, filename, status, page, rank, snippet in rows:
        hit = documents.get(doc_id)
        if hit is None:
            if len(documents) >= limit:
                continue
            hit = documents[doc_id] = DocumentHit(doc_id, filename, status, float(rank))
        if len(hit.pages) < pages_per_document:
            hit.pages.append(PageHit(int(page), float(rank), " ".join(str(snippet).split())))
    return list(documents.values())
