"""The console's actions (POST, CSRF token required), each audited with the operator's name.

Bulk dead-letter and outbox actions answer first with a dry run (how many rows, which filter)
and act only when the form comes back with `confirm=1`. Fleet-wide actions (pausing a queue or
a periodic job) are refused to a console restricted to some orgs: they would act for every
tenant.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations.
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import quote, urlencode
from uuid import UUID

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from .. import pauses, periodic
from ..errors import FleetError
from ..jobs import runs as run_store
from . import audit, bulk, dead, fleet, ledgers, search
from .app import Console, console_of
from .security import SESSION_COOKIE, Operator

router = APIRouter()


class Form:
    def __init__(self, data: Any) -> None:
        self._data = data

    def get(self, name: str, default: str = "") -> str:
        value = self._data.get(name)
        return value.strip() if isinstance(value, str) else default

    def all(self, name: str) -> list[str]:
        return [v for v in self._data.getlist(name) if isinstance(v, str) and v]

    def items(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self._data.multi_items() if isinstance(v, str)]


async def checked(request: Request) -> tuple[Operator, Form]:
    """The operator (auth) and its form, once its CSRF token is checked."""
    console = console_of(request)
    operator = console.guard.operator(request)
    form = Form(await request.form())
    console.guard.check_csrf(request, operator, form.get("csrf") or None)
    return operator, form


Checked = Annotated[tuple[Operator, Form], Depends(checked)]
Con = Annotated[Console, Depends(console_of)]


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None


def _back(form: Form, default: str, msg: str) -> RedirectResponse:
    target = form.get("next") or default
    if not target.startswith("/") or target.startswith("//"):
        target = default  # never redirect off the console
    sep = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{sep}{urlencode({'msg': msg})}", status_code=303)


def _fleet_wide(op: Operator) -> None:
    if op.restricted:
        raise HTTPException(403, "a console restricted to some orgs cannot act fleet-wide")


# -- queues and periodic jobs (issue 23) -------------------------------------------------------


@router.post("/queues/{queue}/{action}")
def queue_action(queue: str, action: str, request: Request, con: Con, auth: Checked) -> Response:
    op, form = auth
    _fleet_wide(op)
    rt, reason = con.runtime(), form.get("reason")
    try:
        if action == "pause":
            if not reason:
                raise HTTPException(400, "a pause needs a reason (kept in the audit)")
            _, changed = pauses.pause(rt, queue, by=op.name, reason=reason)
        elif action == "resume":
            changed = pauses.resume(rt, queue, by=op.name, reason=reason) is not None
        else:
            raise HTTPException(404, f"no action {action}")
    except FleetError as exc:
        raise HTTPException(404 if exc.code == "UNKNOWN_QUEUE" else 409, str(exc)) from exc
    audit.record(rt, actor=op.name, action=f"queue-{action}", target=queue, count=int(changed),
                 detail={"reason": reason}, client=_client(request))  # fmt: skip
    done = f"{action}d queue {queue}" if changed else f"queue {queue} was already {action}d"
    return _back(form, "/", done)


@router.post("/schedule/{job}/{action}")
def schedule_action(job: str, action: str, request: Request, con: Con, auth: Checked) -> Response:
    op, form = auth
    _fleet_wide(op)
    rt, reason = con.runtime(), form.get("reason")
    known = fleet.known_periodic(rt, con.periodic_jobs)
    calls: dict[str, Callable[..., bool | None]] = {
        "pause": periodic.pause,
        "resume": periodic.resume,
        "run-now": periodic.run_now,
    }
    if action not in calls:
        raise HTTPException(404, f"no action {action}")
    if action == "pause" and not reason:
        raise HTTPException(400, "a pause needs a reason (kept in the audit)")
    try:
        changed = calls[action](rt, job, by=op.name, reason=reason, known=known)
    except FleetError as exc:
        raise HTTPException(404, str(exc)) from exc
    audit.record(rt, actor=op.name, action=f"schedule-{action}", target=job,
                 count=0 if changed is False else 1, detail={"reason": reason},
                 client=_client(request))  # fmt: skip
    said = {"pause": "paused", "resume": "resumed", "run-now": "asked to run now:"}[action]
    return _back(form, "/", f"{said} {job}" if changed is not False else f"{job}: nothing to do")


# -- dead letters ----------------------------------------------------------------------------


def _flt(form: Form) -> search.RunFilter:
    values = {name: form.get(f"f_{name}") for name in ("org_id", "job_name", "queue", "error_code")}
    try:
        return search.RunFilter.parse(values, status="DEAD")
    except search.BadFilter as exc:
        raise HTTPException(400, f"bad filter: {exc}") from exc


def _describe(flt: search.RunFilter | None, n_selected: int) -> str:
    if flt is None:
        return f"selection of {n_selected}"
    parts = [f"{k}={v}" for k, v in flt.__dict__.items() if v is not None and k != "status"]
    return "filter " + (" ".join(parts) or "(every dead run)")


@router.post("/cancel")
def cancel_run(request: Request, con: Con, auth: Checked) -> Response:
    """Cancel one run, as `fleet jobs cancel` does: a STAGED, QUEUED or FAILED run at once, a
    RUNNING one at its handler's next progress or checkpoint (cooperative). Audited."""
    op, form = auth
    job_id = form.get("job_id") or ""
    rt = con.runtime()
    if search.run_detail(rt, job_id, orgs=op.orgs) is None:
        raise HTTPException(404, f"no run {job_id}")  # or one of an org this console cannot see
    try:
        status = run_store.cancel(job_id, org_id=None, runtime=rt)
    except FleetError as exc:
        raise HTTPException(409, str(exc)) from exc
    audit.record(rt, actor=op.name, action="run-cancel", target=job_id, count=1,
                 detail={"status": status}, client=_client(request))  # fmt: skip
    said = "canceled" if status == "CANCELED" else f"cancel requested ({status})"
    return _back(form, f"/runs/{quote(job_id, safe='')}", f"{said}: {job_id}")


@router.post("/runs/{action}", response_class=HTMLResponse)
def runs_action(action: str, request: Request, con: Con, auth: Checked) -> Response:
    """Cancel, retry or delete the runs of a search in the action's states (`bulk.py`, at most
    `dead.BULK_LIMIT`): a dry run (how many, which) until confirmed; audited."""
    op, form = auth
    if action not in bulk.ACTIONS:
        raise HTTPException(404, f"no action {action}")
    todo, rt = bulk.ACTIONS[action], con.runtime()
    values = {n: form.get(f"f_{n}") for n in search.SEARCH_FIELDS}
    try:
        flt = search.RunFilter.parse(values)
    except search.BadFilter as exc:
        raise HTTPException(400, f"bad filter: {exc}") from exc
    targets = bulk.targets(rt, todo, flt, op.orgs)
    what = bulk.describe(flt)
    back = "/runs?" + urlencode({n: v for n, v in values.items() if v})
    if not targets:
        return _back(form, back, f"no run to {action} ({what})")
    if form.get("confirm") != "1":
        hidden = [(k, v) for k, v in form.items() if k not in ("csrf", "confirm")]
        return con.render(
            request, op, "confirm_runs.html", page="runs", runs=targets[:20], todo=todo,
            count=len(targets), what=what, hidden=hidden, limit=dead.BULK_LIMIT, back=back,
        )  # fmt: skip
    return _back(form, back, bulk.act(rt, todo, targets, op, client=_client(request), what=what))


@router.post("/dead/{action}", response_class=HTMLResponse)
def dead_action(action: str, request: Request, con: Con, auth: Checked) -> Response:
    op, form = auth
    if action not in ("replay", "purge"):
        raise HTTPException(404, f"no action {action}")
    rt = con.runtime()
    scope = form.get("scope", "selection")
    flt = _flt(form) if scope == "filter" else None
    ids = form.all("job_id")
    runs = dead.targets(rt, op, job_ids=ids, flt=flt)
    what = _describe(flt, len(ids))
    if not runs:
        return _back(form, "/dead", f"no dead run to {action} ({what})")
    single = flt is None and len(ids) == 1 and action == "replay"
    if form.get("confirm") != "1" and not single:
        # The dry run: how many, which; the same form with confirm=1 acts.
        total = search.count(rt, flt, orgs=op.orgs) if flt is not None else len(runs)
        hidden = [(k, v) for k, v in form.items() if k not in ("csrf", "confirm")]
        return con.render(
            request, op, "confirm.html", page="dead", action=action, runs=runs[:20],
            count=len(runs), total=total, what=what, hidden=hidden, limit=dead.BULK_LIMIT,
        )  # fmt: skip
    if action == "replay":
        outcome = dead.replay(rt, runs, op, client=_client(request), what=what)
        msg = f"replayed {len(outcome.done)} run(s)" + (
            f", {len(outcome.failed)} refused: {next(iter(outcome.failed.values()))}"
            if outcome.failed
            else ""
        )
    else:
        msg = f"purged {dead.purge(rt, runs, op, client=_client(request), what=what)} dead run(s)"
    return _back(form, "/dead", msg)


# -- outbox ----------------------------------------------------------------------------------


@router.post("/outbox/retry", response_class=HTMLResponse)
def outbox_retry(request: Request, con: Con, auth: Checked) -> Response:
    op, form = auth
    try:
        ids = [UUID(v) for v in form.all("event_id")]
    except ValueError as exc:
        raise HTTPException(400, f"bad event id: {exc}") from exc
    if not ids:
        return _back(form, "/outbox", "no event selected")
    rt = con.runtime()
    changed = ledgers.retry_outbox(rt, ids, orgs=op.orgs)
    audit.record(rt, actor=op.name, action="outbox-retry", target=f"{len(ids)} event(s)",
                 count=changed, detail={"ids": [str(i) for i in ids[:50]]},
                 client=_client(request))  # fmt: skip
    return _back(form, "/outbox", f"{changed} event(s) due now; the relay publishes them")


# -- session ---------------------------------------------------------------------------------


@router.post("/login")
async def login(request: Request, con: Con) -> Response:
    form = Form(await request.form())
    origin = request.headers.get("origin")
    if origin and origin.split("://", 1)[-1] != request.headers.get("host", ""):
        raise HTTPException(403, "cross-origin login refused")
    cookie = con.guard.login(form.get("token"))
    if cookie is None:
        raise HTTPException(401, "wrong token")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE, cookie, httponly=True, samesite="strict",
        secure=request.url.scheme == "https", path="/",
    )  # fmt: skip
    return response


@router.post("/logout")
def logout(request: Request, con: Con, auth: Checked) -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
