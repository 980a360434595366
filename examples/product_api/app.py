"""The example product API: every write validates, commits its row and stages its job in one
transaction (the outbox), then answers 202 at once with the job id and where to follow it.

    uvicorn examples.product_api.app:create_app --factory

Routes (all under `X-API-Key`, scoped by the key's org): `POST /emails`, `POST /exports`,
`GET /exports/{id}`, `GET /exports/{id}/download`, `POST /documents` (multipart),
`GET /documents/{id}`, `GET /documents/search?q=`, `POST /ai/tasks`, `GET /ai/tasks/{id}`, the
kernel's job router at `/jobs`, the email feedback router at `/email` (one-click
unsubscribe: no key, a signed token); and `/health/live`, `/health/ready` (no key). Bad input: 422
with field paths; an unknown or another org's id: 404; Redis down on a `direct` send: 503
(nothing saved; the outbox path still accepts).
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations, and the
# dependencies are local to `create_app`.
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any
from uuid import UUID

from fastapi import Depends, FastAPI, File, Form, Query, Request, UploadFile
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from shared.api import Problem, job_router
from shared.errors import BrokerUnavailable, FleetError, InvalidState, PayloadError
from shared.runtime import Runtime, get_runtime
from shared.storage import StorageBackend
from workers.ai import client as ai
from workers.doc import client as doc
from workers.email import client as email
from workers.export import client as export

from .auth import admin_dependency, caller_dependency, org_dependency
from .bodies import (
    Accepted,
    AiTaskBody,
    DocumentHitView,
    DownloadLink,
    EmailRequest,
    ExportRequestBody,
    SearchResults,
    accepted,
)
from .health import health_router
from .settings import Caller, ProductSettings

SessionFactory = Callable[[], Session]
#: Where a client's field sits in the request (the rest keep their names under `body`).
FIELD_IN_REQUEST = {"data": ("body", "file"), "schema_name": ("body", "schema")}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": Problem}}
WRITE: dict[int | str, dict[str, Any]] = {
    422: {"description": "Invalid request (field paths in `detail`)"},
    503: {"model": Problem},
}


def create_app(
    settings: ProductSettings | None = None,
    *,
    runtime: Callable[[], Runtime] = get_runtime,
    sessions: SessionFactory | None = None,
    storage: StorageBackend | None = None,
) -> FastAPI:
    """The app; collaborators default to the process's runtime (built on first use, never at
    import). Tests pass `sessions=jobfleet.session` and a storage to run with no database."""
    settings = settings or ProductSettings()
    caller = caller_dependency(settings)
    Who = Annotated[Caller, Depends(caller)]
    app = FastAPI(title="Example product API (jobfleet)", version="1")
    app.include_router(
        job_router(org=org_dependency(caller), admin=admin_dependency(caller), runtime=runtime),
        prefix="/jobs",
    )
    app.include_router(health_router(runtime))
    # No key: the recipient's mailbox provider calls it with the link's signed token.
    app.include_router(email.feedback_router(runtime), prefix="/email")
    _errors(app)
    documents_storage: list[StorageBackend] = [storage] if storage else []

    @contextmanager
    def transaction() -> Iterator[Session]:
        with (sessions or runtime().sessions)() as session, session.begin():
            yield session

    def doc_storage() -> StorageBackend:
        if not documents_storage:
            from shared.storage import build_storage

            documents_storage.append(build_storage(runtime().settings))
        return documents_storage[0]

    @app.post("/emails", status_code=202, response_model=Accepted, responses=WRITE)
    def post_email(body: EmailRequest, who: Who) -> Accepted:
        with transaction() as session:
            done = email.schedule_email(
                session,
                org_id=who.org_id,
                **body.model_dump(exclude={"direct"}),
                via="send" if body.direct else "outbox",
            )
        return accepted(done.email_id, done.job_id, done.status)

    @app.post("/exports", status_code=202, response_model=Accepted, responses=WRITE)
    def post_export(body: ExportRequestBody, who: Who) -> Accepted:
        with transaction() as session:
            done = export.request_export(
                session,
                org_id=who.org_id,
                requested_by=who.user_id,
                type=body.type,
                params=body.params,
                via="send" if body.direct else "outbox",
            )
        return accepted(done.export_id, done.job_id)

    @app.get("/exports/{export_id}", responses=NOT_FOUND)
    def get_export(export_id: UUID, who: Who) -> Any:
        found = export.export_status(export_id, who.org_id)
        return found if found is not None else missing("export", export_id)

    @app.get(
        "/exports/{export_id}/download",
        response_model=DownloadLink,
        responses={**NOT_FOUND, 409: {"model": Problem, "description": "Not COMPLETED yet"}},
    )
    def download_export(export_id: UUID, who: Who) -> Any:
        ttl = runtime().settings.storage_url_ttl_s
        return DownloadLink(
            url=export.download_url(export_id, who.org_id, ttl_s=ttl), expires_in=ttl
        )

    @app.post("/documents", status_code=202, response_model=Accepted, responses=WRITE)
    def post_document(
        file: Annotated[UploadFile, File(description="A PDF")],
        who: Who,
        schema_name: Annotated[str, Form(alias="schema")] = "auto",
    ) -> Accepted:
        limit = doc.doc_settings().max_bytes
        data = file.file.read(limit + 1)  # one byte over is enough to refuse it
        with transaction() as session:
            done = doc.ingest_document(
                session,
                doc_storage(),
                org_id=who.org_id,
                filename=file.filename or "document.pdf",
                data=data,
                content_type=file.content_type or "application/pdf",
                schema_name=schema_name,
                max_bytes=limit,
            )
        return accepted(done.document_id, done.job_id)

    @app.get("/documents/search", response_model=SearchResults)
    def search_documents(
        who: Who,
        q: Annotated[str, Query(min_length=1, max_length=500)],
        limit: Annotated[int, Query(ge=1, le=50)] = 10,
    ) -> SearchResults:
        with runtime().pool.connection() as conn:
            hits = doc.search_documents(conn, who.org_id, q, limit=limit)
        return SearchResults(
            items=[DocumentHitView.model_validate(h, from_attributes=True) for h in hits]
        )

    @app.get("/documents/{document_id}", responses=NOT_FOUND)
    def get_document(document_id: UUID, who: Who) -> Any:
        found = doc.document_status(document_id, who.org_id)
        return found if found is not None else missing("document", document_id)

    @app.post("/ai/tasks", status_code=202, response_model=Accepted, responses=WRITE)
    def post_ai_task(body: AiTaskBody, who: Who) -> Accepted:
        with transaction() as session:
            done = ai.request_ai_task(
                session,
                org_id=who.org_id,
                task=body.task,
                input=body.input,
                params=body.params,
                via="send" if body.direct else "outbox",
            )
        return accepted(done.task_id, done.job_id)

    @app.get("/ai/tasks/{task_id}", responses=NOT_FOUND)
    def get_ai_task(task_id: UUID, who: Who) -> Any:
        found = ai.task_status(task_id, who.org_id)
        return found if found is not None else missing("ai task", task_id)

    return app


def missing(what: str, entity_id: UUID) -> JSONResponse:
    return JSONResponse(
        Problem(code="NOT_FOUND", detail=f"no {what} {entity_id}").model_dump(), status_code=404
    )


def _errors(app: FastAPI) -> None:
    """Domain errors as HTTP answers: field paths for bad input, 503 for an unreachable
    service (nothing was saved), 404/409 from the lookups."""

    @app.exception_handler(PayloadError)
    def invalid(request: Request, exc: PayloadError) -> JSONResponse:
        detail = [
            {"loc": request_loc(e.get("loc", ())), "msg": e.get("msg", ""), "type": "value_error"}
            for e in exc.errors
        ]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(FleetError)
    def fleet_error(request: Request, exc: FleetError) -> JSONResponse:
        if isinstance(exc, BrokerUnavailable) or exc.code in (
            "BROKER_UNAVAILABLE",
            "TRACKING_UNAVAILABLE",
        ):
            return unavailable(exc.code, str(exc))
        status = 404 if exc.code == "NOT_FOUND" else 409 if isinstance(exc, InvalidState) else 500
        return JSONResponse(
            Problem(code=exc.code, detail=str(exc)).model_dump(), status_code=status
        )

    @app.exception_handler(OperationalError)
    def database_down(request: Request, exc: OperationalError) -> JSONResponse:
        return unavailable("DATABASE_UNAVAILABLE", "the database cannot be reached")


def request_loc(loc: Any) -> list[str]:
    """A client's field path as a path in the request, like FastAPI's own 422 answers."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in FIELD_IN_REQUEST:
        return [*FIELD_IN_REQUEST[parts[0]], *parts[1:]]
    return ["body", *parts]


def unavailable(code: str, reason: str) -> JSONResponse:
    return JSONResponse(
        Problem(
            code=code,
            detail=f"{reason}. Nothing was saved: retry later, or send without `direct` "
            "(the outbox path accepts the request and publishes its job when Redis is back).",
        ).model_dump(),
        status_code=503,
        headers={"Retry-After": "5"},
    )
