"""The console's pages (GET): what the operator reads. Every page is scoped to the operator's
orgs when the console is restricted (`CONSOLE_ORGS`). The Overview and the Tenants page show the
domains' panels too (`plugins.py`); `Op` and `Con` are the dependencies of every page, the
domains' included."""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations.
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from . import audit, charts, fleet, ledgers, nodes, search
from .app import Console, console_of
from .security import Operator


def operator_of(request: Request) -> Operator:
    return console_of(request).guard.operator(request)


Op = Annotated[Operator, Depends(operator_of)]
Con = Annotated[Console, Depends(console_of)]
router = APIRouter()


def _overview(request: Request, con: Con, op: Operator) -> dict[str, Any]:
    o = fleet.overview(
        con.runtime(), state_file=con.state_file, orgs=op.orgs, periodic_jobs=con.periodic_jobs
    )
    o["panels"] = con.panels("overview_panel", request, op)
    return o


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, con: Con, op: Op) -> HTMLResponse:
    o = _overview(request, con, op)
    return con.render(request, op, "overview.html", page="overview", o=o)


@router.get("/overview/live", response_class=HTMLResponse)
def overview_live(request: Request, con: Con, op: Op) -> HTMLResponse:
    """The Overview's body alone: what the page's htmx poll swaps in."""
    return con.render(request, op, "_overview.html", o=_overview(request, con, op))


def _filters(request: Request, status: str | None = None) -> search.RunFilter:
    try:
        return search.RunFilter.parse(dict(request.query_params), status=status)
    except search.BadFilter as exc:
        raise HTTPException(400, f"bad filter: {exc}") from exc


def _page(con: Con, op: Operator, request: Request, flt: search.RunFilter) -> dict[str, Any]:
    cursor = request.query_params.get("cursor") or None
    try:
        rows, nxt = search.page(con.runtime(), flt, orgs=op.orgs, limit=50, cursor=cursor)
    except search.BadFilter as exc:
        raise HTTPException(400, f"bad cursor: {exc}") from exc
    query = {k: v for k, v in request.query_params.items() if v and k not in ("cursor", "msg")}
    return {"rows": rows, "next_cursor": nxt, "q": query, "first": cursor is None}


def _charts(request: Request, con: Con) -> dict[str, Any]:
    span = request.query_params.get("range", "hour")
    if span not in charts.RANGES:
        raise HTTPException(400, f"range: hour or day, not {span!r}")
    return charts.data(con.runtime(), span)


@router.get("/charts", response_class=HTMLResponse)
def charts_page(request: Request, con: Con, op: Op) -> HTMLResponse:
    return con.render(request, op, "charts.html", page="charts", c=_charts(request, con))


@router.get("/charts/live", response_class=HTMLResponse)
def charts_live(request: Request, con: Con, op: Op) -> HTMLResponse:
    """The charts alone: what the page's htmx poll swaps in."""
    return con.render(request, op, "_charts.html", c=_charts(request, con))


@router.get("/nodes", response_class=HTMLResponse)
def nodes_page(request: Request, con: Con, op: Op) -> HTMLResponse:
    """Each worker process, what it runs now (the operator's orgs' runs), stale ones explained."""
    data = nodes.page(con.runtime(), orgs=op.orgs)
    return con.render(request, op, "nodes.html", page="nodes", **data)


@router.get("/runs", response_class=HTMLResponse)
def runs(request: Request, con: Con, op: Op) -> HTMLResponse:
    facets = search.facets(con.runtime())
    try:
        flt = search.RunFilter.parse(dict(request.query_params))
    except search.BadFilter as exc:
        # The page again, the operator's search kept in the form, with what is wrong above it.
        query = {k: v for k, v in request.query_params.items() if v and k != "msg"}
        return con.render(
            request, op, "runs.html", status=400, page="runs", facets=facets, rows=[],
            next_cursor=None, q=query, first=True, bad=str(exc),
        )  # fmt: skip
    data = _page(con, op, request, flt)
    return con.render(request, op, "runs.html", page="runs", facets=facets, **data)


@router.get("/runs/{job_id:path}", response_class=HTMLResponse)
def run(job_id: str, request: Request, con: Con, op: Op) -> HTMLResponse:
    found = search.run_detail(con.runtime(), job_id, orgs=op.orgs)
    if found is None:
        raise HTTPException(404, f"no run {job_id}")
    return con.render(request, op, "run.html", page="runs", **found)


@router.get("/dead", response_class=HTMLResponse)
def dead(request: Request, con: Con, op: Op) -> HTMLResponse:
    flt = _filters(request, status="DEAD")
    data = _page(con, op, request, flt)
    total = search.count(con.runtime(), flt, orgs=op.orgs, cap=10_000)
    return con.render(
        request, op, "dead.html", page="dead", total=total,
        facets=search.facets(con.runtime(), error_codes=True),
        **data,
    )  # fmt: skip


@router.get("/outbox", response_class=HTMLResponse)
def outbox(request: Request, con: Con, op: Op) -> HTMLResponse:
    rt = con.runtime()
    return con.render(
        request, op, "outbox.html", page="outbox",
        summary=fleet.guard(lambda: fleet.outbox(rt, op.orgs)),
        pending=ledgers.outbox_events(rt, "PENDING", orgs=op.orgs),
        failed=ledgers.outbox_events(rt, "FAILED", orgs=op.orgs),
    )  # fmt: skip


@router.get("/tenants", response_class=HTMLResponse)
def tenants(request: Request, con: Con, op: Op) -> HTMLResponse:
    """The domains' tenant panels, each scoped to the operator's orgs."""
    panels = con.panels("tenant_panel", request, op)
    registered = any(p.tenant_panel is not None for p in con.plugins)
    return con.render(
        request, op, "tenants.html", page="tenants", panels=panels, registered=registered
    )


@router.get("/audit", response_class=HTMLResponse)
def audit_page(request: Request, con: Con, op: Op) -> HTMLResponse:
    entries = [] if op.restricted else audit.recent(con.runtime(), limit=200)
    return con.render(request, op, "audit.html", page="audit", entries=entries)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, con: Con) -> HTMLResponse:
    return con.render(request, None, "login.html", page="login")
