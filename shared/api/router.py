"""The job-status router a product API mounts under its own auth.

    from shared.api import job_router

    app.include_router(job_router(org=current_org, admin=current_admin), prefix="/jobs")

`org` is the product's FastAPI dependency that resolves the caller's org (its own API keys,
sessions or tokens): every route is scoped by it, and a job of another org answers 404 exactly
like a job that does not exist. `admin` (optional) authorizes the dead-letter routes and returns
the caller's identity, which the replay audit records; without it those routes are not mounted.
"""

# No `from __future__ import annotations` here: FastAPI reads the endpoints' annotations, and the
# dependencies (`Org`, `Rt`, `Admin`) are local to `job_router`, out of reach of string annotations.
from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .. import dlq, pauses
from ..errors import BrokerUnavailable, FleetError, InvalidState, RunNotFound, TrackingUnavailable
from ..jobs import catalog, runs
from ..jobs.runs import RunView
from ..jobs.statuses import TERMINAL_STATUSES
from ..observability.logging import redact
from ..runtime import Runtime, get_runtime
from . import events, queries
from .models import (
    CancelResult,
    JobPage,
    JobStatus,
    JobView,
    PauseRequest,
    Problem,
    Progress,
    QueueState,
    ReplayResult,
)

STATUS_OF: dict[type[FleetError], int] = {
    RunNotFound: 404,
    pauses.UnknownQueue: 404,
    InvalidState: 409,
    BrokerUnavailable: 503,
    TrackingUnavailable: 503,
}
PROBLEMS: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "No such job for this org"},
}
#: The keyset pages: a cursor this API did not hand out.
BAD_CURSOR: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": "BAD_CURSOR: not a cursor of this list"},
}


def view(run: RunView) -> JobView:
    return JobView(
        job_id=run.job_id,
        org_id=run.org_id,
        job_name=run.job_name,
        queue=run.queue,
        status=JobStatus(run.status),
        entity_type=run.entity_type,
        entity_id=run.entity_id,
        payload=redact(run.payload),
        result=redact(run.result),
        error_code=run.error_code,
        error=redact(run.error),
        attempt=run.attempt,
        max_attempts=run.max_attempts,
        progress=Progress(**run.progress) if run.progress else None,
        cancel_requested=run.cancel_requested,
        request_id=run.request_id,
        queued_at=run.queued_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        next_retry_at=run.next_retry_at,
        replay_count=run.replay_count,
    )


def problem(exc: FleetError) -> JSONResponse:
    status = next((code for cls, code in STATUS_OF.items() if isinstance(exc, cls)), 500)
    return JSONResponse(Problem(code=exc.code, detail=str(exc)).model_dump(), status_code=status)


def not_found(job_id: str) -> JSONResponse:
    return problem(RunNotFound(f"no job {job_id}"))


def job_router(
    *,
    org: Callable[..., UUID],
    admin: Callable[..., str] | None = None,
    operator: Callable[..., str] | None = None,
    runtime: Callable[[], Runtime] = get_runtime,
    poll_interval_s: float = 0.5,
) -> APIRouter:
    Org = Annotated[UUID, Depends(org)]
    Rt = Annotated[Runtime, Depends(runtime)]
    router = APIRouter(tags=["jobs"])

    if operator is not None:
        # Fleet-wide actions, for the fleet's operators (not a tenant's admins): the product's
        # `operator` dependency authorizes them and names the caller for the audit.
        Operator = Annotated[str, Depends(operator)]

        @router.get("/queues", response_model=list[QueueState], summary="Queues, paused or not")
        def list_queues(rt: Rt, _: Operator) -> list[QueueState]:
            paused = pauses.paused_everywhere(rt.queue_servers, rt.settings.broker_namespace)
            return [
                _queue_state(q, paused.get(q)) for q in sorted(set(catalog.QUEUES) | set(paused))
            ]

        @router.post(
            "/queues/{queue}/pause",
            response_model=QueueState,
            responses={404: {"model": Problem}},
            summary="Pause a queue fleet-wide (audited)",
        )
        def pause_queue(
            queue: str, body: PauseRequest, rt: Rt, who: Operator
        ) -> QueueState | JSONResponse:
            try:
                info, _changed = pauses.pause(rt, queue, by=who, reason=body.reason)
            except FleetError as exc:
                return problem(exc)
            return _queue_state(queue, info)

        @router.post(
            "/queues/{queue}/resume",
            response_model=QueueState,
            responses={404: {"model": Problem}},
            summary="Resume a paused queue (audited)",
        )
        def resume_queue(queue: str, rt: Rt, who: Operator) -> QueueState | JSONResponse:
            try:
                pauses.resume(rt, queue, by=who)
            except FleetError as exc:
                return problem(exc)
            return _queue_state(queue, None)

    if admin is not None:
        Admin = Annotated[str, Depends(admin)]

        @router.get(
            "/dead-letters",
            response_model=JobPage,
            responses=BAD_CURSOR,
            summary="Dead jobs of this org",
        )
        def list_dead(
            org_id: Org,
            rt: Rt,
            _: Admin,
            job_name: str | None = None,
            limit: Annotated[int, Query(ge=1, le=200)] = 50,
            cursor: str | None = None,
        ) -> JobPage | JSONResponse:
            return _page(
                rt, org_id, queries.Filters(status="DEAD", job_name=job_name), limit, cursor
            )

        @router.post(
            "/dead-letters/{job_id}/replay",
            response_model=ReplayResult,
            responses={**PROBLEMS, 409: {"model": Problem}, 503: {"model": Problem}},
            summary="Replay a dead job (audited with the caller's identity)",
        )
        def replay(job_id: str, org_id: Org, rt: Rt, who: Admin) -> ReplayResult | JSONResponse:
            if runs.find(job_id, org_id=org_id, runtime=rt) is None:
                return not_found(job_id)
            try:
                done = dlq.replay(job_id, org_id=org_id, by=who, runtime=rt)
            except FleetError as exc:
                return problem(exc)
            return ReplayResult(job_id=job_id, message_id=done.message_id, replayed_by=who)

    @router.get(
        "",
        response_model=JobPage,
        responses=BAD_CURSOR,
        summary="This org's jobs, newest first",
    )
    def list_jobs(
        org_id: Org,
        rt: Rt,
        entity_type: str | None = None,
        entity_id: str | None = None,
        status: JobStatus | None = None,
        job_name: str | None = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: str | None = None,
    ) -> JobPage | JSONResponse:
        filters = queries.Filters(
            entity_type=entity_type,
            entity_id=entity_id,
            status=status.value if status else None,
            job_name=job_name,
        )
        return _page(rt, org_id, filters, limit, cursor)

    @router.get("/{job_id}", response_model=JobView, responses=PROBLEMS, summary="One job")
    def get_job(job_id: str, org_id: Org, rt: Rt) -> JobView | JSONResponse:
        run = runs.find(job_id, org_id=org_id, runtime=rt)
        return view(run) if run is not None else not_found(job_id)

    @router.post(
        "/{job_id}/cancel",
        response_model=CancelResult,
        responses={**PROBLEMS, 409: {"model": Problem}},
        summary="Cancel a queued, retrying or running job",
    )
    def cancel(job_id: str, org_id: Org, rt: Rt) -> CancelResult | JSONResponse:
        try:
            status = runs.cancel(job_id, org_id=org_id, runtime=rt)
        except FleetError as exc:
            return problem(exc)
        return CancelResult(job_id=job_id, status=status)

    @router.get(
        "/{job_id}/events",
        response_class=StreamingResponse,
        response_model=None,
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "status events"},
            204: {"description": "The Last-Event-ID sent was the job's terminal event"},
            400: {"model": Problem, "description": "BAD_LAST_EVENT_ID"},
            **PROBLEMS,
        },
        summary="Status and progress as Server-Sent Events until a terminal state",
    )
    def follow(
        job_id: str,
        org_id: Org,
        rt: Rt,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> StreamingResponse | JSONResponse | Response:
        after: int | None = None
        if last_event_id is not None:
            try:
                after = int(last_event_id)
            except ValueError:
                return JSONResponse(
                    Problem(
                        code="BAD_LAST_EVENT_ID",
                        detail=f"Last-Event-ID must be an event id of this stream, not {last_event_id!r}",
                    ).model_dump(),
                    status_code=400,
                )
        row = runs.await_run(rt, job_id, lambda: queries.state(rt, job_id, org_id=org_id))
        if row is None:
            return not_found(job_id)
        if after is not None and row["version"] <= after and row["status"] in TERMINAL_STATUSES:
            return Response(status_code=204)  # seen the end already: EventSource stops
        return StreamingResponse(
            events.stream(rt, job_id, org_id=org_id, interval=poll_interval_s, after=after),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return router


def _page(
    rt: Runtime, org_id: UUID, filters: queries.Filters, limit: int, cursor: str | None
) -> JobPage | JSONResponse:
    try:
        found, next_cursor = queries.page(
            rt, org_id=org_id, filters=filters, limit=limit, cursor=cursor
        )
    except queries.BadCursor as exc:
        return JSONResponse(
            Problem(code="BAD_CURSOR", detail=str(exc)).model_dump(), status_code=400
        )
    return JobPage(items=[view(run) for run in found], next_cursor=next_cursor)


def _queue_state(queue: str, pause: pauses.QueuePause | None) -> QueueState:
    if pause is None:
        return QueueState(queue=queue, paused=False)
    return QueueState(queue=queue, paused=True, by=pause.by, reason=pause.reason, since=pause.at)
