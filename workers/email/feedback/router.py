"""The email feedback router a product API mounts, outside its own auth (the caller is a
mailbox provider or a recipient's browser, with nothing but the token of the link):

    from workers.email.feedback.router import feedback_router

    app.include_router(feedback_router(), prefix="/email")   # = EMAIL_FEEDBACK_URL's path

`POST /unsubscribe/{token}`: RFC 8058 one-click unsubscribe (200, idempotent). `GET` of the same
URL changes nothing and answers a confirmation page whose button POSTs. `GET /o/{token}.gif`: the
open pixel (the first open recorded); `GET /c/{token}/{mac}?u=<url>`: a tracked link, recorded,
302 to `url` only when the mac says it was in that email (tracking.py). A forged token: 400, an
expired one: 410, an email that no longer exists: 404; nothing changes. `POST /ses/sns`: Amazon
SES events through an SNS subscription (sns.py): 200, or 401 when unsigned, badly signed,
replayed or too old.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations.
import html
from collections.abc import Callable
from datetime import datetime

import structlog
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from shared.runtime import Runtime, get_runtime

from ..settings import EmailSettings, email_settings
from ..wiring import utcnow
from . import sns, tokens, tracking, unsubscribe

log = structlog.get_logger("jobfleet.email.feedback")


def feedback_router(
    runtime: Callable[[], Runtime] = get_runtime,
    *,
    clock: Callable[[], datetime] = utcnow,
    sns_fetch: sns.Fetch = sns.fetch_https,
    settings: Callable[[], EmailSettings] = email_settings,
) -> APIRouter:
    """`sns_fetch`: how SNS signing certificates (and SubscribeURLs) are fetched; `settings`:
    the email settings (default: the process's), read on the first request that needs them."""
    router = APIRouter(tags=["email feedback"])
    keys: list[bytes] = []
    verifiers: list[sns.Verifier] = []

    def verifier() -> sns.Verifier:
        if not verifiers:
            email = settings()
            verifiers.append(sns.Verifier(email.sns_cert_hosts, email.sns_max_age_s, sns_fetch))
        return verifiers[0]

    def key() -> bytes:
        if not keys:
            keys.append(tokens.feedback_key(settings(), runtime().settings.var_dir))
        return keys[0]

    def check(token: str, request: Request) -> tokens.EmailRef | JSONResponse:
        try:
            return tokens.verify(key(), unsubscribe.PURPOSE, token, clock())
        except tokens.ExpiredToken:
            return _refused(request, 410, "TOKEN_EXPIRED", "this unsubscribe link has expired")
        except tokens.BadToken as exc:
            return _refused(request, 400, "INVALID_TOKEN", f"not a valid unsubscribe link: {exc}")

    @router.post("/unsubscribe/{token}")
    def one_click(token: str, request: Request) -> JSONResponse:
        ref = check(token, request)
        if isinstance(ref, JSONResponse):
            return ref
        with runtime().pool.connection() as conn:
            done = unsubscribe.unsubscribe(conn, ref, clock())
        if done is None:
            return _refused(request, 404, "NOT_FOUND", "no such email")
        return JSONResponse(
            {"status": "UNSUBSCRIBED", "new": done.new, "sequences_stopped": done.sequences_stopped}
        )

    @router.get("/unsubscribe/{token}", response_class=HTMLResponse)
    def confirm_page(token: str, request: Request) -> HTMLResponse:
        ref = check(token, request)
        if isinstance(ref, JSONResponse):
            return HTMLResponse(
                "<!doctype html><p>This unsubscribe link is not valid.</p>",
                status_code=ref.status_code,
            )
        action = html.escape(str(request.url.path), quote=True)
        return HTMLResponse(
            "<!doctype html><title>Unsubscribe</title>"
            f'<form method="post" action="{action}">'
            f'<input type="hidden" name="List-Unsubscribe" value="One-Click">'
            "<button>Unsubscribe</button></form>"
        )

    @router.get("/o/{token}.gif")
    def opened(token: str, request: Request) -> Response:
        try:
            ref = tracking.verify_open(key(), token, clock())
        except tokens.BadToken as exc:
            return _refused(request, 410 if isinstance(exc, tokens.ExpiredToken) else 400,
                            "INVALID_TOKEN", str(exc))  # fmt: skip
        with runtime().pool.connection() as conn:
            tracking.record_open(conn, ref, request.headers.get("user-agent"), clock())
        return Response(tracking.PIXEL, media_type="image/gif", headers=NO_STORE)

    @router.get("/c/{token}/{mac}")
    def clicked(token: str, mac: str, u: str, request: Request) -> Response:
        try:
            ref = tracking.verify_click(key(), token, mac, u, clock())
        except tokens.ExpiredToken:
            return _refused(request, 410, "TOKEN_EXPIRED", "this tracked link has expired")
        except tokens.BadToken as exc:
            return _refused(request, 400, "INVALID_TOKEN", str(exc))
        with runtime().pool.connection() as conn:
            tracking.record_click(conn, ref, u, request.headers.get("user-agent"), clock())
        return RedirectResponse(u, status_code=302, headers=NO_STORE)

    @router.post("/ses/sns")
    async def ses_event(request: Request) -> JSONResponse:
        body = await request.body()
        return await run_in_threadpool(_ses_event, body, request)

    def _ses_event(body: bytes, request: Request) -> JSONResponse:
        try:
            with runtime().pool.connection() as conn:
                done = sns.handle(conn, verifier(), key(), body, clock())
        except sns.Refused as exc:
            return _refused(request, 401, "UNAUTHORIZED", str(exc))
        log.info("email.ses_event", outcome=done)
        return JSONResponse({"status": done})

    return router


NO_STORE = {"Cache-Control": "no-store, private"}


def _refused(request: Request, status: int, code: str, detail: str) -> JSONResponse:
    client = request.client.host if request.client else None
    route = getattr(request.scope.get("endpoint"), "__name__", None)  # not the path: tokens
    log.warning("email.feedback_refused", route=route, code=code, reason=detail, client=client)
    return JSONResponse({"code": code, "detail": detail}, status_code=status)
