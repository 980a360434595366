"""Reading and steering runs: the Python API an HTTP API exposes (every lookup org-scoped)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

import redis
from psycopg.rows import dict_row

from ..errors import InvalidState, RunNotFound
from ..runtime import Runtime, get_runtime

COLUMNS = """job_id, org_id, job_name, queue, status, entity_type, entity_id, payload, result,
error_code, error, attempt, max_attempts, progress, checkpoint, cancel_requested, request_id,
message_id, queued_at, started_at, finished_at, next_retry_at, replayed_at, replayed_by,
replay_count, executions, lease_owner, lease_until"""


CANCEL_EVENTS = """
UPDATE outbox_events SET status = 'CANCELED', error = 'canceled by an operator'
 WHERE job_id = %s AND status = 'PENDING'
"""


#: How long a read waits for the run of a job Redis has accepted but whose QUEUED row is not
#: written yet: another process sent it (an API replica, a script) and its writer writes within
#: milliseconds, later under load or through a Postgres hiccup.
ACCEPTED_WAIT_S = 3.0
ACCEPTED_POLL_S = 0.05

T = TypeVar("T")


def accepted(runtime: Runtime, job_id: str) -> bool:
    """Redis holds `job_id`'s dedup key: a send took it within the dedup window."""
    try:
        return runtime.sender.gate.holds(job_id)
    except redis.RedisError:
        return False


def await_run(
    runtime: Runtime,
    job_id: str,
    read: Callable[[], T | None],
    *,
    wait_s: float = ACCEPTED_WAIT_S,
    poll_s: float = ACCEPTED_POLL_S,
) -> T | None:
    """`read()`, or once the run of a job just sent is written, or None when it is unknown.

    A job is visible as soon as its send returns: this process's own sends are flushed
    (`Runtime.settle`); a job another process sent is known by its dedup key in Redis, and
    `read` is tried again once its row is there (`wait_s` at most). A job nobody sent, or
    another org's, is unknown at once."""
    found = read()
    if found is not None:
        return found
    if runtime.settle():
        found = read()
        if found is not None:
            return found
    # Written already (for another org: not the caller's), or never sent: unknown at once.
    if _written(runtime, job_id) or not accepted(runtime, job_id):
        return None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(poll_s)
        if _written(runtime, job_id):
            return read()
    return None


def _written(runtime: Runtime, job_id: str) -> bool:
    with runtime.pool.connection() as conn:
        return (
            conn.execute("SELECT 1 FROM job_runs WHERE job_id = %s", (job_id,)).fetchone()
            is not None
        )


@dataclass(frozen=True)
class RunView:
    job_id: str
    org_id: UUID
    job_name: str
    queue: str
    status: str
    entity_type: str | None
    entity_id: str | None
    payload: Any
    result: Any
    error_code: str | None
    error: str | None
    attempt: int
    max_attempts: int | None
    progress: dict[str, int] | None
    checkpoint: Any
    cancel_requested: bool
    request_id: str | None
    message_id: str | None
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    next_retry_at: datetime | None
    replayed_at: datetime | None
    replayed_by: str | None
    replay_count: int
    #: How many times the run was started (job_executions has each start: worker, time).
    executions: int
    #: The worker executing it and until when, unless it renews (see docs/kernel.md).
    lease_owner: str | None
    lease_until: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            k: (v.isoformat() if isinstance(v, datetime) else str(v) if isinstance(v, UUID) else v)
            for k, v in self.__dict__.items()
        }


def find(job_id: str, *, org_id: UUID | None, runtime: Runtime | None = None) -> RunView | None:
    """The run of `job_id`, or None. `org_id=None` is the operator's unscoped view."""
    runtime = runtime or get_runtime()
    sql = f"SELECT {COLUMNS} FROM job_runs WHERE job_id = %s"
    params: list[Any] = [job_id]
    if org_id is not None:
        sql += " AND org_id = %s"
        params.append(org_id)

    def read() -> dict[str, Any] | None:
        with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            found: dict[str, Any] | None = cur.execute(sql, params).fetchone()
        return found

    row = await_run(runtime, job_id, read)
    # Published from STAGED by this process a moment ago? Its QUEUED row follows.
    if row is not None and row["status"] == "STAGED" and runtime.settle():
        row = read()
    return RunView(**row) if row else None


def list_runs(
    *,
    org_id: UUID | None = None,
    status: str | None = None,
    job_name: str | None = None,
    queue: str | None = None,
    entity_id: str | None = None,
    limit: int = 50,
    runtime: Runtime | None = None,
) -> list[RunView]:
    runtime = runtime or get_runtime()
    where, params = ["TRUE"], []
    for column, value in (
        ("org_id", org_id),
        ("status", status),
        ("job_name", job_name),
        ("queue", queue),
        ("entity_id", entity_id),
    ):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(value)
    sql = (
        f"SELECT {COLUMNS} FROM job_runs WHERE {' AND '.join(where)}"
        " ORDER BY queued_at DESC, id DESC LIMIT %s"
    )
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql, [*params, limit]).fetchall()
    return [RunView(**row) for row in rows]


def _started_unwritten(runtime: Runtime, job_id: str, queue: str) -> bool:
    """Whether a worker started this QUEUED run and keeps its start in Redis (a run shorter
    than TRACKING_START_WRITE_AFTER_MS is written once, with its outcome). Otherwise its job
    id's key is released here, in the same script (under the run's row lock): a delivery
    after that finds no key and has its start written, which waits for this cancel and then
    skips the CANCELED run."""
    return runtime.run_starts.cancel(runtime.sender.gate.client(queue), job_id) is not None


def cancel(job_id: str, *, org_id: UUID | None, runtime: Runtime | None = None) -> str:
    """Cancel a run: STAGED (committed, not yet published: its outbox event is canceled too),
    QUEUED or FAILED (waiting for a retry) → CANCELED at once, and the message is skipped when
    it arrives; RUNNING → cancel requested, honoured at the handler's next
    progress or checkpoint. Returns the resulting status."""
    runtime = runtime or get_runtime()
    scope, params = ("AND org_id = %s", [org_id]) if org_id is not None else ("", [])

    def exists() -> bool | None:
        with runtime.pool.connection() as conn:
            sql = f"SELECT 1 FROM job_runs WHERE job_id = %s {scope}"
            return True if conn.execute(sql, [job_id, *params]).fetchone() else None

    await_run(runtime, job_id, exists)  # a job just sent is cancelable at once
    with runtime.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        # The outbox events first, then the run: the relay's order (it locks an event, then
        # records the message id on its STAGED run). An event being published is waited for:
        # then the run carries its message id, which the canceled run skips.
        conn.execute(CANCEL_EVENTS, (job_id,))
        row = conn.execute(
            f"SELECT status, queue FROM job_runs WHERE job_id = %s {scope} FOR UPDATE",
            [job_id, *params],
        ).fetchone()
        if row is None:
            raise RunNotFound(f"no run {job_id}")
        status = row[0]
        if status in ("STAGED", "QUEUED") and _started_unwritten(runtime, job_id, row[1]):
            status = "RUNNING"  # started, its start kept in Redis (broker/starts.py)
        if status in ("STAGED", "QUEUED", "FAILED"):
            conn.execute(
                "UPDATE job_runs SET status = 'CANCELED', cancel_requested = TRUE, finished_at = now(), "
                "error_code = 'CANCELED', error = 'canceled by an operator' WHERE job_id = %s",
                (job_id,),
            )
        elif status == "RUNNING":
            conn.execute("UPDATE job_runs SET cancel_requested = TRUE WHERE job_id = %s", (job_id,))
            return "CANCEL_REQUESTED"
        else:
            raise InvalidState(
                f"{job_id} is {status}; only STAGED, QUEUED, FAILED or RUNNING runs can be canceled"
            )
    # A canceled job may be sent again (DESIGN §2: only queued, running or completed ids are
    # duplicates): release its id.
    runtime.sender.gate.forget([job_id])
    return "CANCELED"
