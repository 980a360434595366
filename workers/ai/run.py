"""`ai:run`: load (or create) the task row, claim it, run the task, store the result once.

Idempotency: a SUCCEEDED task answers its stored result and never calls the provider again,
whichever delivery, replay or duplicate job asks. A RUNNING task under a live lease belongs to
another delivery (a worker presumed dead may still be calling): this one waits (`RetryLater`)
rather than pay for the same call twice. Only a lease past `AI_TASK_LEASE_S` is taken over.

Provider failures (see `provider.py`):
- 429, or a 5xx with `Retry-After`: the provider said when to come back, so the job is
  delayed by that much (`RetryLater`, up to `AI_RETRY_AFTER_MAX_S`) without spending one of the
  ai queue's two attempts — up to `AI_MAX_DEFERRALS` times per task, after which it counts as a
  failed attempt (a key throttled for good must not loop forever).
- 5xx without `Retry-After`, timeouts, connection errors: a failed attempt, retried on the
  queue's backoff (2 attempts from 5 s by default).
- other 4xx: permanent, with the provider's message (`PROVIDER_REJECTED`).
"""

from __future__ import annotations

from typing import Any

import structlog

from shared.errors import PermanentError, RetryLater
from shared.jobs.context import JobContext
from workers.ai.contracts import AiRunV1

from . import store, tasks
from .meter import Meter
from .provider import Completion, Message, ProviderThrottled
from .providers.local_embed import MODEL_NAME as LOCAL_MODEL
from .wiring import Ai

log = structlog.get_logger("jobfleet.ai")


def run_task(payload: AiRunV1, job: JobContext, ai: Ai) -> dict[str, Any]:
    prepared = _prepare(payload, ai)
    if isinstance(prepared, dict):
        return prepared
    row, params = prepared
    meter = Meter(ai, row)
    try:
        result, provider_name = _execute(row, params, meter, ai)
    except BaseException as exc:
        _release_after(exc, row, job, ai)
        raise
    with ai.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        store.succeed(conn, row, result, provider_name, ai.clock())
        done = store.get(conn, row.id, row.org_id)
    log.info("ai.task_succeeded", task_id=str(row.id), task=row.task, calls=meter.calls)
    return summary(done or row, reused=False)


def _prepare(payload: AiRunV1, ai: Ai) -> tuple[store.TaskRow, Any] | dict[str, Any]:
    """The claimed row and its parsed params, or the stored result of a finished task."""
    now = ai.clock()
    invalid: PermanentError | None = None
    # The pool's connections commit asynchronously (no WAL flush wait): losing this claim in
    # a Postgres crash only lets the task run again; the outcome commits below are synchronous.
    with ai.pool.connection() as conn:
        row = store.ensure(conn, payload)
        if row is None:
            raise PermanentError(
                f"no AI task {payload.entity_id} in org {payload.org_id}", code="NOT_FOUND"
            )
        if row.task != payload.task:
            raise PermanentError(
                f"AI task {row.id} is a {row.task}, not a {payload.task}", code="PAYLOAD_MISMATCH"
            )
        if row.status == "SUCCEEDED":
            return summary(row, reused=True)
        try:
            params = tasks.parse_params(row.task, row.params, row.input)
        except PermanentError as exc:
            # Recorded first (leaving the block commits), raised after.
            conn.execute("SET LOCAL synchronous_commit TO on")
            store.release(conn, row, "FAILED", now, error_code=exc.code, error=str(exc))
            invalid = exc
        else:
            claimed = store.claim(conn, row, now, ai.settings.task_lease_s)
            if claimed is None:
                return _not_claimed(conn, row, now)
    if invalid is not None:
        raise invalid
    assert claimed is not None
    return claimed, params


def _execute(row: store.TaskRow, params: Any, meter: Meter, ai: Ai) -> tuple[Any, str]:
    settings = ai.settings
    if isinstance(params, tasks.EmbedParams):
        name = params.provider or settings.embed_provider
        model = params.model or (LOCAL_MODEL if name == "local" else settings.embed_model)
        texts = row.input if isinstance(row.input, list) else [row.input]
        embedded = meter.embed(ai.provider(name), texts, model=model)
        dims = len(embedded.vectors[0]) if embedded.vectors else 0
        return {"vectors": embedded.vectors, "dims": dims, "model": embedded.model}, name
    provider = ai.provider("openai")
    model = params.model or settings.model
    max_tokens = min(params.max_tokens or settings.max_output_tokens, settings.max_output_tokens)

    def chat(messages: list[Message], json_mode: bool) -> Completion:
        return meter.chat(
            provider, messages, model=model, max_tokens=max_tokens, json_mode=json_mode
        )

    if isinstance(params, tasks.SummarizeParams):
        return tasks.summarize(row.input, params, chat), provider.name
    if isinstance(params, tasks.ExtractParams):
        return tasks.extract(row.input, params, chat), provider.name
    return tasks.classify(row.input, params, chat), provider.name


def _not_claimed(conn: Any, row: store.TaskRow, now: Any) -> dict[str, Any]:
    current = store.get(conn, row.id, row.org_id) or row
    if current.status == "SUCCEEDED":
        return summary(current, reused=True)
    wait_ms = 1_000
    if current.lease_until is not None:
        wait_ms = max(wait_ms, int((current.lease_until - now).total_seconds() * 1000) + 100)
    raise RetryLater(f"AI task {row.id} is running in another delivery", delay_ms=wait_ms)


def _release_after(exc: BaseException, row: store.TaskRow, job: JobContext, ai: Ai) -> None:
    """Put the row back in the state the job's outcome implies; may turn `exc` into a delay."""
    settings = ai.settings
    code = getattr(exc, "code", None) or type(exc).__name__.upper()
    if (
        isinstance(exc, ProviderThrottled)
        and exc.retry_after_s is not None
        and row.deferrals < settings.max_deferrals
    ):
        delay_ms = int(min(exc.retry_after_s, settings.retry_after_max_s) * 1000) + 50
        _release(ai, row, "PENDING", code, str(exc), deferral=True)
        raise RetryLater(
            f"provider throttled, Retry-After honoured: {exc}", delay_ms=delay_ms
        ) from exc
    final = isinstance(exc, PermanentError) or (
        not isinstance(exc, RetryLater) and job.attempt >= job.max_attempts
    )
    if not isinstance(exc, Exception):
        code = "INTERRUPTED"  # time limit, shutdown: the next delivery takes over
    _release(ai, row, "FAILED" if final else "PENDING", code, str(exc)[:2_000], deferral=False)


def _release(
    ai: Ai, row: store.TaskRow, status: str, code: str, error: str, *, deferral: bool
) -> None:
    with ai.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        store.release(
            conn, row, status, ai.clock(), error_code=code, error=error, deferral=deferral
        )


def summary(row: store.TaskRow, *, reused: bool) -> dict[str, Any]:
    """The job result: figures only (the output stays on the task row, out of logs and runs)."""
    return {
        "task_id": str(row.id),
        "task": row.task,
        "status": row.status,
        "model": row.model,
        "calls": row.calls,
        "tokens_in": row.tokens_in,
        "tokens_out": row.tokens_out,
        "cost": str(row.cost),
        "reused": reused,
    }
