"""`/health/live` and `/health/ready` (Redis and Postgres answer, the database is migrated), in
the same shape as the fleet's processes, so that `make run` supervises the API like them."""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations.
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from shared.observability import probes
from shared.runtime import Runtime


def health_router(runtime: Callable[[], Runtime]) -> APIRouter:
    router = APIRouter(tags=["health"])
    checks: dict[str, Callable[[], None]] = {}

    def all_checks() -> dict[str, Callable[[], None]]:
        if not checks:
            from shared import redis_conn

            settings = runtime().settings
            client = redis_conn.client(settings, socket_connect_timeout=1, socket_timeout=1)
            checks["redis"] = probes.redis_check(client)
            checks["postgres"] = probes.postgres_check(settings.database_dsn)
        return checks

    @router.get("/health/live")
    def live() -> dict[str, str]:
        return {"status": "live"}

    @router.get("/health/ready")
    def ready() -> JSONResponse:
        results: dict[str, Any] = {}
        for name, check in all_checks().items():
            try:
                check()
                results[name] = "ok"
            except Exception as exc:  # any failure is "not ready", named in the answer
                results[name] = f"{type(exc).__name__}: {exc}"[:200]
        ok = all(v == "ok" for v in results.values())
        return JSONResponse(
            {"status": "ready" if ok else "not ready", "checks": results},
            status_code=200 if ok else 503,
        )

    return router
