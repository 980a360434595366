"""`fleet doc ...`: upload and ingest a PDF, follow a document, search the indexed pages.

Registered lazily by the fleet CLI as `workers.doc.cli:app` (the kernel imports no worker).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="Doc worker: ingest PDFs, document status, full-text search.", no_args_is_help=True
)

OrgOption = Annotated[
    uuid.UUID, typer.Option("--org", help="Tenant (org id); every lookup is scoped by it.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help='Web-search syntax: words, "a phrase", or, -word.')],
    org: OrgOption,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=100, help="Most documents shown.")
    ] = 10,
    pages: Annotated[
        int, typer.Option("--pages", min=1, max=20, help="Best pages per document.")
    ] = 3,
    as_json: JsonOption = False,
) -> None:
    """Documents and pages of ORG matching QUERY, best first, with snippets."""
    from shared.cli import output

    from .search import search
    from .wiring import get_services

    with get_services().pool.connection() as conn:
        hits = search(conn, org, query, limit=limit, pages_per_document=pages)
    if as_json:
        output.print_json([_hit_dict(h) for h in hits])
        return
    rows = [
        [
            output.cell(h.document_id),
            output.cell(h.filename or ""),
            f"{h.rank:.3f}",
            str(p.page),
            output.cell(p.snippet),
        ]
        for h in hits
        for p in h.pages
    ]
    output.print_table(
        ["document", "file", "rank", "page", "snippet"], rows, title="Matches", fold=["snippet"]
    )


def _hit_dict(hit: Any) -> dict[str, Any]:
    return {
        "document_id": hit.document_id,
        "filename": hit.filename,
        "status": hit.status,
        "rank": round(hit.rank, 6),
        "pages": [
            {"page": p.page, "rank": round(p.rank, 6), "snippet": p.snippet} for p in hit.pages
        ],
    }


@app.command("status")
def status_command(
    document_id: Annotated[uuid.UUID, typer.Argument(help="documents.id")],
    org: OrgOption,
    as_json: JsonOption = False,
) -> None:
    """A document's status, pages done/total and extracted fields."""
    from shared.cli import output
    from shared.errors import RunNotFound

    from .status import document_status
    from .wiring import get_services

    status = document_status(get_services().pool, document_id, org)
    if status is None:
        raise RunNotFound(f"document {document_id} not found in org {org}")
    if as_json:
        output.print_json(status)
        return
    output.print_fields(status, title=f"Document {document_id}")


@app.command("ingest")
def ingest_command(
    path: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="A PDF file.")
    ],
    org: OrgOption,
    schema: Annotated[str, typer.Option("--schema", help="invoice, quote or auto.")] = "auto",
) -> None:
    """Upload PATH to storage (file_objects + documents rows) and send doc:ingest."""
    from shared.cli import output
    from shared.jobs import catalog
    from workers.doc.contracts import DocIngestV1

    from .extract import SCHEMA_NAMES
    from .source import upload
    from .wiring import get_services

    if schema not in SCHEMA_NAMES:
        raise typer.BadParameter(f"schema must be one of {', '.join(SCHEMA_NAMES)}")
    services = get_services()
    with services.pool.connection() as conn:
        up = upload(
            conn, services.storage, org, path.read_bytes(), filename=path.name, schema_name=schema
        )
    sent = catalog.DOC_INGEST.send(
        DocIngestV1(org_id=org, entity_id=up.document_id, file_object_id=up.file_object_id)
    )
    output.out.print(f"document {up.document_id} uploaded; doc:ingest {output.cell(sent.job_id)}")
