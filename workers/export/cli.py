"""`fleet export ...`: request exports, look at them, get a download link.

The domain's registration names it (`fleet export`); the fleet CLI imports it only when the
command runs.
"""

from __future__ import annotations

import json
import uuid
from datetime import date
from typing import Annotated

import typer

app = typer.Typer(
    help="Export worker: request exports, their status, download links.", no_args_is_help=True
)

OrgOption = Annotated[
    uuid.UUID, typer.Option("--org", help="Org of the export (every lookup is scoped by it)")
]


def _filters(pairs: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected K=V, got {pair!r}", param_hint="--filter")
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


@app.command()
def url(
    export_id: Annotated[uuid.UUID, typer.Argument(help="exports.id")],
    org: OrgOption,
    ttl: Annotated[
        int | None, typer.Option(help="Link lifetime in seconds (default STORAGE_URL_TTL_S)")
    ] = None,
) -> None:
    """Print a presigned URL (S3) or an HMAC-signed expiring link (local) to a finished export."""
    from .downloads import export_url
    from .wiring import get_exporter

    typer.echo(export_url(get_exporter(), export_id, org, ttl_s=ttl))


@app.command()
def create(
    type: Annotated[
        str, typer.Argument(help="Export type, e.g. ACCOUNTING (see `fleet export types`)")
    ],
    org: OrgOption,
    by: Annotated[uuid.UUID, typer.Option("--by", help="User id of the requester")],
    format: Annotated[str, typer.Option(help="CSV, XLSX, PDF or ZIP")] = "CSV",
    start: Annotated[str | None, typer.Option(help="First day (YYYY-MM-DD)")] = None,
    end: Annotated[str | None, typer.Option(help="Last day (YYYY-MM-DD)")] = None,
    filter: Annotated[list[str] | None, typer.Option("--filter", help="K=V (repeatable)")] = None,
    bom: Annotated[
        bool, typer.Option("--bom", help="CSV/ZIP: start with a UTF-8 BOM (for Excel on Windows)")
    ] = False,
) -> None:
    """Insert an export and stage its export:build job (outbox, one transaction)."""
    from shared.runtime import get_runtime

    from .requests import request_export

    params: dict[str, object] = {"format": format.upper(), "filters": _filters(filter or [])}
    if bom:
        params["bom"] = True
    if start or end:
        params["date_range"] = {
            "start": date.fromisoformat(start or end or ""),
            "end": date.fromisoformat(end or start or ""),
        }
    export_id, job_id = request_export(
        get_runtime(), org_id=org, requested_by=by, type=type, params=params
    )
    typer.echo(f"export {export_id} requested (job {job_id})")


@app.command()
def show(
    export_id: Annotated[uuid.UUID, typer.Argument(help="exports.id")], org: OrgOption
) -> None:
    """Status, progress, row count and error of an export, as JSON."""
    from shared.runtime import get_runtime

    from . import store
    from .downloads import ExportUnavailable

    with get_runtime().pool.connection() as conn:
        row = store.get(conn, export_id, org)
    if row is None:
        raise ExportUnavailable(f"no export {export_id} for org {org}")
    typer.echo(json.dumps(row.__dict__, default=str, indent=2))


@app.command()
def types() -> None:
    """The registered export types, their columns and filters."""
    from .registry import describe, get, names

    for name in names():
        typer.echo(json.dumps(describe(get(name))))


@app.command("serve-links")
def serve_links(
    host: Annotated[str, typer.Option(help="Bind address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (match STORAGE_LINK_BASE_URL)")] = 9180,
) -> None:
    """Serve local signed links (local backend only) until interrupted."""
    from wsgiref.simple_server import make_server

    from .downloads import links_app
    from .wiring import get_exporter

    with make_server(host, port, links_app(get_exporter().storage)) as server:
        typer.echo(f"serving signed links on http://{host}:{port}")
        server.serve_forever()
