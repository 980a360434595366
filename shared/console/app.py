"""The operator console: a FastAPI app of server-rendered pages (Jinja2, htmx; no build step).

    fleet web                                     # 127.0.0.1:8190 (CONSOLE_HOST / CONSOLE_PORT)
    uvicorn shared.console.app:create_app --factory

The kernel's pages: Overview (live), Charts (live), Nodes, Runs, a run, Dead letters, Outbox,
Tenants, Audit. Auth and CSRF: `security.py`; the figures: `fleet.py`, `charts.py`,
`nodes.py`, `search.py` (with the search line, `query.py`), `ledgers.py`; the actions:
`actions.py`, `bulk.py`, `dead.py`. The domains add theirs (pages with their nav entries, cards on the Tenants page
and on the Overview) through the console module their registration names: the protocol is in
`plugins.py`; with none registered the kernel's pages stand alone. Needs the `api` extra.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import jinja2
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from ..config import get_settings
from ..runtime import Runtime, get_runtime
from .security import Guard, Operator
from .settings import ConsoleSettings, check_bind

if TYPE_CHECKING:
    from markupsafe import Markup

    from .plugins import Plugin

HERE = Path(__file__).parent
log = logging.getLogger(__name__)

#: The kernel's pages in the nav bar, (page key, label, path); the domains' go before the last.
NAV_HEAD = (
    ("overview", "Overview", "/"),
    ("charts", "Charts", "/charts"),
    ("nodes", "Nodes", "/nodes"),
    ("runs", "Runs", "/runs"),
    ("dead", "Dead letters", "/dead"),
    ("outbox", "Outbox", "/outbox"),
    ("tenants", "Tenants", "/tenants"),
)
NAV_TAIL = (("audit", "Audit", "/audit"),)


@dataclass(frozen=True)
class Console:
    """What every route needs: settings, the guard, the runtime, where `make run` keeps state,
    and the domains' console modules (`plugins.py`)."""

    settings: ConsoleSettings
    guard: Guard
    runtime: Callable[[], Runtime]
    state_file: Path
    periodic_jobs: tuple[str, ...]
    templates: Jinja2Templates
    plugins: tuple[Plugin, ...] = ()

    @property
    def nav(self) -> tuple[tuple[str, str, str], ...]:
        return (*NAV_HEAD, *(e for p in self.plugins for e in p.nav), *NAV_TAIL)

    def context(self, request: Request, operator: Operator | None) -> dict[str, Any]:
        """What every template sees."""
        return {
            "request": request,
            "operator": operator,
            "csrf": self.guard.csrf_token(operator) if operator else "",
            "refresh_s": self.settings.refresh_s,
            "now": datetime.now(UTC),
            "msg": request.query_params.get("msg"),
            "nav": self.nav,
        }

    def render(
        self, request: Request, operator: Operator | None, name: str, status: int = 200, **data: Any
    ) -> HTMLResponse:
        context = {**self.context(request, operator), **data}
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def panels(
        self, kind: Literal["tenant_panel", "overview_panel"], request: Request, operator: Operator
    ) -> list[Markup]:
        """The domains' cards of one kind, rendered, scoped to the operator's orgs. Each degrades
        on its own: a panel that fails is a card with its error, the others still show."""
        from markupsafe import Markup

        base = self.context(request, operator)
        shown: list[Markup] = []
        for plugin in self.plugins:
            source = getattr(plugin, kind)
            if source is None:
                continue
            try:
                found = source(self.runtime(), operator.orgs)
                if found is None:
                    continue
                template, data = found
                html = self.templates.get_template(template).render({**base, **data})
            except Exception as exc:
                log.warning("console panel %s of %s failed", kind, plugin.name, exc_info=True)
                first = (str(exc).strip().splitlines() or [""])[0]
                error = f"{type(exc).__name__}: {first}"
                html = self.templates.get_template("_panel_error.html").render(
                    {**base, "name": plugin.name, "error": error}
                )
            shown.append(Markup(html))
        return shown


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


def _from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


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
    """The console app, with the pages and panels of every registered domain console module.
    Raises `UnsafeBind` when it would listen off loopback without auth, `plugins.PluginError`
    when a console module does not follow the protocol."""
    from .. import domains
    from .plugins import load

    settings = settings or ConsoleSettings()
    check_bind(settings)
    plugins = load(domains.consoles())
    loader = jinja2.ChoiceLoader(
        [
            jinja2.FileSystemLoader(HERE / "templates"),
            jinja2.PrefixLoader(
                {p.name: jinja2.FileSystemLoader(p.templates) for p in plugins if p.templates}
            ),
        ]
    )
    env = jinja2.Environment(loader=loader, autoescape=jinja2.select_autoescape())
    templates = Jinja2Templates(env=env)
    templates.env.filters.update(t=_fmt_time, ago=_ago, ms=_ms, pretty=_json, ts=_from_epoch)
    from .search import SEARCH_FIELDS

    templates.env.globals["search_fields"] = SEARCH_FIELDS
    if state_file is None:
        state_file = Path(get_settings().var_dir) / "run" / "fleet.json"
    app = FastAPI(title="jobfleet console", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.console = Console(
        settings, Guard(settings), runtime, state_file, tuple(periodic_jobs), templates, plugins
    )
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    from . import actions, pages

    app.include_router(pages.router)
    app.include_router(actions.router)
    for plugin in plugins:
        if plugin.router is not None:
            app.include_router(plugin.router)

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
        started = time.perf_counter()
        response: Response = await call_next(request)
        # How long the console took (bench/console.py reads it: the server's own time).
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
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
