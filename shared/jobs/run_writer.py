"""Group commit of `job_runs` writes for one worker process.

Worker threads hand their writes to one writer thread, which runs everything that arrived
meanwhile in a single transaction. A batch that holds a terminal write (COMPLETED, DEAD, ...)
commits with `synchronous_commit=on` and its callers wait for it, so a message is acknowledged
only after its row is durable; a batch of starts and progress alone commits asynchronously.
One fsync then serves every thread of the process instead of one per job.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import psycopg
import structlog
from psycopg.types.json import Jsonb

from .message import MessageInfo

log = structlog.get_logger("jobfleet.run_writer")

START = """
INSERT INTO job_runs AS r (org_id, job_name, job_id, queue, status, entity_type, entity_id,
                           payload, attempt, max_attempts, request_id, message_id, queued_at,
                           started_at)
VALUES (%s, %s, %s, %s, 'RUNNING', %s, %s, %s, %s, %s, %s, %s, now(), now())
ON CONFLICT (job_id) DO UPDATE
   SET status = 'RUNNING', attempt = EXCLUDED.attempt, max_attempts = EXCLUDED.max_attempts,
       message_id = EXCLUDED.message_id, started_at = now(), finished_at = NULL,
       next_retry_at = NULL
 WHERE r.status IN ('QUEUED', 'RUNNING', 'FAILED')
RETURNING r.checkpoint, r.cancel_requested
"""
FINISH = """
UPDATE job_runs
   SET status = %s, result = %s, error_code = %s, error = %s, next_retry_at = %s,
       finished_at = CASE WHEN %s THEN now() ELSE NULL END
 WHERE job_id = %s AND status <> 'CANCELED'
"""
PROGRESS = """
UPDATE job_runs
   SET progress = %s, checkpoint = COALESCE(%s, checkpoint)
 WHERE job_id = %s
RETURNING cancel_requested
"""


@dataclass(frozen=True)
class Started:
    checkpoint: Any
    cancel_requested: bool


@dataclass(frozen=True)
class Finish:
    job_id: str
    status: str
    result: Any = None
    error_code: str | None = None
    error: str | None = None
    next_retry_at: Any = None

    @property
    def terminal(self) -> bool:
        return self.status in ("COMPLETED", "DEAD", "CANCELED")


@dataclass
class _Op:
    kind: str  # start | finish | progress
    params: tuple[Any, ...]
    durable: bool
    future: Future[Any]


class RunWriter:
    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        *,
        max_batch: int = 256,
        name: str = "jobfleet-run-writer",
    ) -> None:
        self._connect = connect
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._conn: psycopg.Connection[Any] | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._started = False
        self._lock = threading.Lock()

    # -- caller side -------------------------------------------------------------------------

    def start_run(self, info: MessageInfo, max_attempts: int, timeout: float = 30) -> Started | None:
        """RUNNING, unless the run is already COMPLETED, DEAD or CANCELED (then None)."""
        params = (
            info.org_id,
            info.job_name,
            info.job_id,
            info.queue,
            info.entity_type,
            info.entity_id,
            Jsonb(info.payload),
            info.attempt,
            max_attempts,
            info.request_id,
            info.message_id,
        )
        result: Started | None = self._submit("start", params, durable=False).result(timeout)
        return result

    def finish_run(self, finish: Finish, timeout: float = 30) -> None:
        """Record an outcome; returns once it is durable (terminal) or written (non-terminal)."""
        params = (
            finish.status,
            Jsonb(finish.result) if finish.result is not None else None,
            finish.error_code,
            finish.error,
            finish.next_retry_at,
            finish.terminal,
            finish.job_id,
        )
        self._submit("finish", params, durable=finish.terminal).result(timeout)

    def progress(self, job_id: str, done: int, total: int, checkpoint: Any, timeout: float = 30) -> bool:
        """Record progress (and checkpoint); True when an operator asked to cancel."""
        params = (
            Jsonb({"done": done, "total": total}),
            Jsonb(checkpoint) if checkpoint is not None else None,
            job_id,
        )
        canceled: bool = self._submit("progress", params, durable=checkpoint is not None).result(timeout)
        return canceled

    def _submit(self, kind: str, params: tuple[Any, ...], *, durable: bool) -> Future[Any]:
        self._ensure_thread()
        future: Future[Any] = Future()
        self._queue.put(_Op(kind, params, durable, future))
        return future

    def _ensure_thread(self) -> None:
        if not self._started:
            with self._lock:
                if not self._started:
                    self._thread.start()
                    self._started = True

    def close(self, timeout: float = 10) -> None:
        if self._started:
            self._queue.put(None)
            self._thread.join(timeout)
        if self._conn is not None:
            self._conn.close()

    # -- writer thread -----------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            op = self._queue.get()
            if op is None:
                return
            batch = [op]
            while len(batch) < self._max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._flush(batch)
                    return
                batch.append(nxt)
            self._flush(batch)

    def _flush(self, batch: Sequence[_Op]) -> None:
        for attempt in (1, 2):
            try:
                results = self._write(batch)
            except psycopg.Error as exc:
                self._reset()
                transient = isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure)
                if attempt == 1 and transient:
                    continue
                for op in batch:
                    op.future.set_exception(exc)
                return
            except BaseException as exc:  # a bug must not hang the worker threads
                self._reset()
                for op in batch:
                    op.future.set_exception(exc)
                return
            for op, result in zip(batch, results, strict=True):
                op.future.set_result(result)
            return

    def _write(self, batch: Sequence[_Op]) -> list[Any]:
        conn = self._connection()
        results: list[Any] = []
        with conn.transaction():
            if not any(op.durable for op in batch):
                conn.execute("SET LOCAL synchronous_commit TO off")
            with conn.cursor() as cur:
                for op in batch:
                    if op.kind == "finish":
                        cur.execute(FINISH, op.params)
                        results.append(None)
                    elif op.kind == "start":
                        cur.execute(START, op.params)
                        row = cur.fetchone()
                        results.append(Started(row[0], bool(row[1])) if row else None)
                    else:
                        cur.execute(PROGRESS, op.params)
                        row = cur.fetchone()
                        results.append(bool(row[0]) if row else False)
        return results

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _reset(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
        self._conn = None
