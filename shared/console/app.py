"""The operator console: a FastAPI app of server-rendered pages (Jinja2, htmx; no build step).

    fleet web                                     # 127.0.0.1:8190 (CONSOLE_HOST / CONSOLE_PORT)
    uvicorn shared.console.app:create_app --factory

Pages: Overview (live), Runs, a run, Dead letters, Outbox, Tenants (AI cost, email
suppressions), Chain (actions, keeper), Audit. Auth and CSRF: `security.py`; the figures:
`fleet.py`, `search.py`, `ledgers.py`; the actions: `actions.py`. Needs the `api` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from ..config import get_settings
from ..runtime import Runtime, get_runtime
from .security import Guard, Operator
from .settings import ConsoleSettings, check_bind

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Console:
    """What every route needs: settings, the guard, the runtime, where `make run` keeps state."""

    settings: ConsoleSettings
    guard: Guard
    runtime: Callable[[], Runtime]
    state_file: Path
    periodic_jobs: tuple[str, ...]
    templates: Jinja2Templates

    def render(
        self, request: Request, operator: Operator | None, name: str, status: int = 200, **data: Any
    ) -> HTMLResponse:
        context = {
            "operator": operator,
            "csrf": self.guard.csrf_token(operator) if operator else "",
            "refresh_s": self.settings.refresh_s,
            "now": datetime.now(UTC),
            "msg": request.query_params.get("msg"),
            **data,
        }
        return self.templates.TemplateResponse(request, name, context, status_code=status)


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _fmt_time(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, str) and len(value) >= 19 and value[10] == "T":
        return value[:19].replace("T", " ")
    return "" if value is None else str(value)


def _ago(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    if not isinstance(value, datetime):
        return ""
    seconds = (datetime.now(UTC) - value).total_seconds()
    if seconds < 0:
        return f"in {_span(-seconds)}"
    return f"{_span(seconds)} ago"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _ms(value: Any) -> str:
    if value is None:
        return ""
    value = float(value)
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _json(value: Any) -> str:
    import json

    return str(json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False))


def create_app(
    settings: ConsoleSettings | None = None,
    *,
    runtime: Callable[[], Runtime] = get_runtime,
    state_file: Path | None = None,
    periodic_jobs: Sequence[str] = (),
) -> FastAPI:
    """The console app. Raises `UnsafeBind` when it would listen off loopback without auth."""
    settings = settings or ConsoleSettings()
    check_bind(settings)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters.update(t=_fmt_time, ago=_ago, ms=_ms, pretty=_json)
    if state_file is None:
        state_file = Path(get_settings().var_dir) / "run" / "fleet.json"
    app = FastAPI(title="jobfleet console", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.console = Console(
        settings, Guard(settings), runtime, state_file, tuple(periodic_jobs), templates
    )
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    from . import actions, pages

    app.include_router(pages.router)
    app.include_router(actions.router)

    @app.get("/health/live", include_in_schema=False)
    def live() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/health/ready", include_in_schema=False)
    def ready() -> JSONResponse:
        try:
            with runtime().pool.connection() as conn:
                conn.execute("SELECT 1 FROM console_audit LIMIT 0")
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            return JSONResponse({"status": "not ready", "checks": {"postgres": first}}, 503)
        return JSONResponse({"status": "ok", "checks": {"postgres": "ok"}})

    @app.exception_handler(HTTPException)
    def http_error(request: Request, exc: HTTPException) -> Response:
        console = console_of(request)
        login = exc.status_code == 401 and console.settings.token is not None
        response = console.render(
            request, None, "error.html", status=exc.status_code, detail=exc.detail, login=login
        )
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.middleware("http")
    async def headers(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
        )
        if not request.url.path.startswith("/static"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    return app
