"""Group commit of `job_runs` writes for one process.

Threads hand their writes to a lane; a lane's thread runs everything that arrived meanwhile as
one transaction in one round trip (pipeline mode). Two lanes, each with its own connection:
- the durable lane commits with `synchronous_commit=on` (terminal outcomes, checkpoints); its
  callers wait, so a message is acknowledged only after its COMPLETED/DEAD row is durable;
- the fast lane commits asynchronously (starts, progress, QUEUED rows), so a start never
  waits behind another job's fsync.
One fsync then serves every thread of the process instead of one per job.

Producers use the fast lane without waiting: `record_queued` hands the QUEUED row over and
returns (the message is already in Redis). If Postgres refuses, those rows are kept and retried
until it answers, and `healthy` turns False so that new sends fail loudly meanwhile (DESIGN §3).

A row that Postgres refuses for what it holds (a data or integrity error: a NUL character, an
org id that is no UUID) is not an outage: its batch is written again row by row, the refused
row once more with the values it cannot store replaced (a marker for a payload or a result,
U+FFFD for a character in a text), and if it is still refused it is set apart (`refused`,
`run_writer.row_refused` in the log, `RowRefused` for a caller who waits). It never blocks the
other rows, is never retried forever, and leaves the writer healthy.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import queue
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg
import structlog
from psycopg.types.json import Jsonb

from .message import MessageInfo

log = structlog.get_logger("jobfleet.run_writer")

#: Most refused rows a writer remembers (`RunWriter.refused`); each is logged as it happens.
REFUSED_KEPT = 100
#: What Postgres cannot store in `text` or `jsonb` (see `contracts.base.unstorable`).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class RowRefused(Exception):
    """Postgres refused this run row for what it holds (a data or integrity error): retrying
    the same row cannot help."""

    def __init__(self, job_id: str | None, kind: str, error: str) -> None:
        super().__init__(f"run row {job_id} ({kind}) refused by the run store: {error}")
        self.job_id = job_id
        self.kind = kind
        self.error = error


def _refused_for_its_values(exc: BaseException) -> bool:
    """A data (SQLSTATE class 22) or integrity (23) error: the row, not the store, is at fault."""
    return isinstance(exc, psycopg.errors.DataError | psycopg.errors.IntegrityError)


def _scrub(value: Any) -> Any:
    """`value` with every character Postgres cannot store replaced by U+FFFD."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def _storable(kind: str, params: Any, error: str) -> Any:
    """The row of `kind` with what Postgres refused replaced: a JSON document by a marker (a
    scrubbed copy could be replayed as if it were the original), texts scrubbed."""
    if not isinstance(params, dict):
        return _scrub(params)
    row = {k: _scrub(v) for k, v in params.items()}
    marker = {"unstorable": f"refused by the run store: {_scrub(error)[:200]}"}
    for key in ("p", "res"):
        if key in row and row[key] is not None and row[key] != params[key]:
            row[key] = marker
    return row


#: A run's row is in the partition of the day it was first written (`created_on`, migration
#: 0020_partitioned_runs); the job id is unique with it, so a statement that may create a run
#: takes that day from `jobfleet_run_created_on(job_id)`: the existing row's, or today's (under
#: a lock on the job id, so that two first writes cannot make two rows on two days).
#: A start kept in Redis (`broker/starts.py`) is written with the time it began (`st`) and, for
#: an execution found interrupted, the lease it held (`lu`, run out): epoch seconds, else now;
#: and with the day of its QUEUED row (`c`), which its producer put on the job id's key: the row
#: is found in its partition at once (`jobfleet_run_created_on` takes a lock and probes every
#: day partition's index: a third of a QUEUED row's cost at 5 partitions, most of it at 40).
#: Every statement takes a whole batch as one JSON document (`json_to_recordset`): one
#: statement and one round trip per batch, and the per-row encoding is orjson's (`_rows`) rather
#: than Python-level parameter adaptation in a thread that shares the GIL with the workers.
START_MANY = """
WITH s AS (
INSERT INTO job_runs AS r (org_id, job_name, job_id, queue, status, entity_type, entity_id,
                           payload, attempt, max_attempts, request_id, message_id, queued_at,
                           started_at, executions, lease_owner, lease_until, created_on)
SELECT o, n, j, q, 'RUNNING', et, e, p, a, ma, rq, m, now(), COALESCE(to_timestamp(st), now()),
       1, w, COALESCE(to_timestamp(lu), now() + make_interval(secs => ls)),
       COALESCE(c, jobfleet_run_created_on(j))
  FROM json_to_recordset(%s::json)
       AS u(o uuid, n text, j text, q text, et text, e text, p jsonb, a int, ma int, rq text, m text,
            w text, ls float8, st float8, lu float8, c date)
 -- One job id lock after another in one order (jobfleet_run_created_on), whatever the batch's.
 ORDER BY j
ON CONFLICT (job_id, created_on) DO UPDATE
   SET status = 'RUNNING', attempt = EXCLUDED.attempt, max_attempts = EXCLUDED.max_attempts,
       message_id = EXCLUDED.message_id, started_at = EXCLUDED.started_at, finished_at = NULL,
       next_retry_at = NULL, executions = r.executions + 1,
       lease_owner = EXCLUDED.lease_owner, lease_until = EXCLUDED.lease_until
 WHERE r.status IN ('QUEUED', 'FAILED')
    -- Published a moment ago: its QUEUED row is not written yet.
    OR r.status = 'STAGED'
    -- A CANCELED run sent again (a new message id) starts; the canceled delivery does not.
    OR (r.status = 'CANCELED' AND r.message_id IS DISTINCT FROM EXCLUDED.message_id)
    -- A RUNNING run is never started here: see BLOCKED (a live lease) and TAKEOVER.
RETURNING r.job_id, r.checkpoint, r.cancel_requested, r.attempt, r.executions, r.message_id,
          r.lease_owner, r.started_at
), e AS (
INSERT INTO job_executions (job_id, execution, attempt, worker, message_id, started_at)
SELECT job_id, executions, attempt, lease_owner, message_id, started_at FROM s
)
SELECT job_id, checkpoint, cancel_requested, attempt, executions FROM s
"""
#: Why the starts a batch did not take were refused (rarely needed: duplicates, redeliveries).
BLOCKED = """
SELECT job_id, status, attempt, executions,
       COALESCE(lease_until > now(), FALSE) AS live,
       GREATEST(COALESCE(EXTRACT(epoch FROM lease_until - now()), 0), 0) AS remaining_s,
       lease_owner
  FROM job_runs WHERE job_id = ANY(%s)
"""
#: Start a RUNNING run whose lease ran out (its worker died or stalled): a new execution, and
#: the interrupted one counts as an attempt.
TAKEOVER = """
WITH s AS (
UPDATE job_runs AS r
   SET attempt = GREATEST(r.attempt + 1, %(a)s), max_attempts = %(ma)s, message_id = %(m)s,
       started_at = now(), executions = r.executions + 1, lease_owner = %(w)s,
       lease_until = now() + make_interval(secs => %(ls)s)
 WHERE r.job_id = %(j)s AND r.status = 'RUNNING'
   AND (r.lease_until IS NULL OR r.lease_until <= now())
RETURNING r.job_id, r.checkpoint, r.cancel_requested, r.attempt, r.executions, r.message_id,
          r.lease_owner
), e AS (
INSERT INTO job_executions (job_id, execution, attempt, worker, message_id)
SELECT job_id, executions, attempt, lease_owner, message_id FROM s
)
SELECT job_id, checkpoint, cancel_requested, attempt, executions FROM s
"""
#: A RUNNING run whose lease ran out after its last attempt: DEAD without another execution.
BURY = """
UPDATE job_runs
   SET status = 'DEAD', error_code = %(ec)s, error = %(er)s, finished_at = now()
 WHERE job_id = %(j)s AND status = 'RUNNING' AND (lease_until IS NULL OR lease_until <= now())
"""
#: Extend the leases of the runs this worker is executing; returns the ones it still holds.
#: A row another statement is writing is skipped, never waited for: it is this worker's own
#: FINISH (a run's lease is renewed until its outcome is durable) or a takeover. Waiting, the
#: renewal and the durable lane's FINISH, each in its own row order, deadlocked (both lanes
#: stalled for `deadlock_timeout`). Held: the runs RUNNING under this worker's lease as the
#: statement began (a skipped run too; a takeover shows at the next renewal).
RENEW = """
WITH renewed AS (
UPDATE job_runs AS r
   SET lease_until = now() + make_interval(secs => %(ls)s)
  FROM (SELECT id, created_on FROM job_runs
         WHERE job_id = ANY(%(ids)s) AND lease_owner = %(w)s AND status = 'RUNNING'
           FOR UPDATE SKIP LOCKED) AS free
 -- The whole primary key: each row found in its own partition (the id alone probes them all:
 -- 3 times slower with 35 day partitions, docs/scaling.md).
 WHERE r.id = free.id AND r.created_on = free.created_on
)
SELECT job_id FROM job_runs WHERE job_id = ANY(%(ids)s) AND lease_owner = %(w)s AND status = 'RUNNING'
"""
#: Hand back runs this worker stops without finishing (a shutdown past its grace): QUEUED
#: again, not an attempt, their lease given up to a marker no outcome of theirs can match (a
#: handler that ends as the process exits records nothing). Their messages go back to the queue.
RELEASE = """
UPDATE job_runs
   SET status = 'QUEUED', lease_owner = %(released)s, lease_until = NULL
 WHERE job_id = ANY(%(ids)s) AND lease_owner = %(w)s AND status = 'RUNNING'
RETURNING job_id
"""
#: A QUEUED row a producer's batch inserted new: job id, message id, queue, its row's day
#: (`created_on`, ISO): told to `RunWriter(on_fresh=)`.
FreshRun = tuple[str, str, str, str]
#: `lease_owner` of a run handed back by its worker at shutdown.
RELEASED = "released"
QUEUED_MANY = """
INSERT INTO job_runs (org_id, job_name, job_id, queue, status, entity_type, entity_id,
                      payload, attempt, request_id, message_id, queued_at, created_on)
SELECT o, n, j, q, 'QUEUED', et, e, p, 0, r, m, to_timestamp(t), jobfleet_run_created_on(j)
  FROM json_to_recordset(%s::json)
       AS u(o uuid, n text, j text, q text, et text, e text, p jsonb, r text, m text, t float8)
 ORDER BY j
ON CONFLICT (job_id, created_on) DO UPDATE
   SET status = 'QUEUED', payload = EXCLUDED.payload, request_id = EXCLUDED.request_id,
       message_id = EXCLUDED.message_id, queued_at = EXCLUDED.queued_at, attempt = 0,
       cancel_requested = FALSE, error_code = NULL, error = NULL, result = NULL,
       started_at = NULL, finished_at = NULL
 -- Staged in its producer's transaction, now published (shared/outbox). A CANCELED run sent
 -- again (a new message id) is queued again; the very message a cancel was meant to skip is not.
 WHERE job_runs.status = 'STAGED'
    OR (job_runs.status = 'CANCELED' AND job_runs.message_id IS DISTINCT FROM EXCLUDED.message_id)
-- The runs this statement made QUEUED: a worker may keep their starts in Redis (`on_fresh`).
RETURNING job_id, message_id, created_on
"""
#: The outcome of a run whose start was kept in Redis (`broker/starts.py`): its start, its
#: execution and its outcome in one statement, the run's one write after its QUEUED row. Taken
#: as START_MANY would take the start (a run QUEUED, STAGED, FAILED, or CANCELED before this
#: message was sent), so a run the store already sees started or finished is left as it is:
#: its execution was put on the record by the delivery that took it over.
FINISH_STARTED = """
WITH f AS (
INSERT INTO job_runs AS r (org_id, job_name, job_id, queue, status, entity_type, entity_id,
                           payload, attempt, max_attempts, request_id, message_id, queued_at,
                           started_at, executions, lease_owner, result, error_code, error,
                           next_retry_at, finished_at, created_on)
SELECT o, n, j, q, s, et, e, p, a, ma, rq, m, to_timestamp(st), to_timestamp(st), 1, w, res, ec,
       er, nr, CASE WHEN fin THEN now() ELSE NULL END, COALESCE(c, jobfleet_run_created_on(j))
  FROM json_to_recordset(%s::json)
       AS u(o uuid, n text, j text, q text, et text, e text, p jsonb, a int, ma int, rq text, m text,
            w text, st float8, s text, res jsonb, ec text, er text, nr timestamptz, fin bool,
            c date)
 ORDER BY j
ON CONFLICT (job_id, created_on) DO UPDATE
   SET status = EXCLUDED.status, attempt = EXCLUDED.attempt,
       max_attempts = EXCLUDED.max_attempts, message_id = EXCLUDED.message_id,
       started_at = EXCLUDED.started_at, executions = r.executions + 1,
       lease_owner = EXCLUDED.lease_owner, lease_until = NULL, result = EXCLUDED.result,
       error_code = EXCLUDED.error_code, error = EXCLUDED.error,
       next_retry_at = EXCLUDED.next_retry_at, finished_at = EXCLUDED.finished_at
 WHERE r.status IN ('QUEUED', 'FAILED', 'STAGED')
    OR (r.status = 'CANCELED' AND r.message_id IS DISTINCT FROM EXCLUDED.message_id)
RETURNING r.job_id, r.executions, r.attempt, r.lease_owner, r.message_id, r.started_at
)
INSERT INTO job_executions (job_id, execution, attempt, worker, message_id, started_at)
SELECT job_id, executions, attempt, lease_owner, message_id, started_at FROM f
"""
FINISH_MANY = """
UPDATE job_runs AS r
   SET status = u.s, result = u.res, error_code = u.ec, error = u.er, next_retry_at = u.nr,
       finished_at = CASE WHEN u.fin THEN now() ELSE NULL END
  FROM json_to_recordset(%s::json)
       AS u(j text, s text, res jsonb, ec text, er text, nr timestamptz, fin bool, w text)
 WHERE r.job_id = u.j AND r.status <> 'CANCELED'
   -- The job ids again, as an array: the runs are looked up in the job id index whatever the
   -- table's statistics say. Joined on `u.j` alone, a burst of sends that autovacuum had not
   -- analyzed yet made it a sequential scan of every row per batch (7 ms for 4 runs at 20,000).
   AND r.job_id = ANY(%s::text[])
   -- Only the lease holder records the outcome: a stalled worker whose run was taken over
   -- does not overwrite it (its execution is on the record in job_executions).
   AND (r.lease_owner IS NULL OR u.w IS NULL OR r.lease_owner = u.w)
"""
PROGRESS = """
UPDATE job_runs
   SET progress = %s, checkpoint = COALESCE(%s, checkpoint)
 WHERE job_id = %s AND (lease_owner IS NULL OR lease_owner = %s)
RETURNING cancel_requested
"""


@dataclass(frozen=True)
class Started:
    checkpoint: Any
    cancel_requested: bool
    #: The attempt this execution is (an interrupted execution counted) and its number.
    attempt: int = 1
    execution: int = 1


@dataclass(frozen=True)
class Blocked:
    """A start refused because the run is RUNNING: `live` when another execution holds its
    lease (`remaining_s` more), else interrupted (its lease ran out: a dead or stalled worker)."""

    live: bool
    remaining_s: float
    attempt: int
    executions: int
    #: Who holds (or held) its lease: `host:pid:random` (`RunWriter.owner`).
    owner: str | None = None


@dataclass(frozen=True)
class Finish:
    job_id: str
    status: str
    result: Any = None
    error_code: str | None = None
    error: str | None = None
    next_retry_at: Any = None
    #: A start kept in Redis (`broker/starts.py`): its START row (`RunWriter.start_row`), then
    #: written with the outcome in one statement (`FINISH_STARTED`).
    start: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.status in ("COMPLETED", "DEAD", "CANCELED")


class _Waiter:
    """A one-shot result slot; a bare lock is the cheapest thing to block a thread on (a
    `concurrent.futures.Future` costs a Condition and callbacks per write)."""

    __slots__ = ("_error", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._value: Any = None
        self._error: BaseException | None = None

    def set_result(self, value: Any) -> None:
        self._value = value
        self._lock.release()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._lock.release()

    def result(self, timeout: float) -> Any:
        """The result, for any number of callers: the lock is released again at once, since an
        outcome is waited for by the acker and, after a crash, by a run that must not start
        before its neighbours' outcomes are durable. (Kept acquired, the second caller waited
        out its whole timeout: acks stalled 60 s and redelivered runs sat still.)"""
        if not self._lock.acquire(timeout=timeout):
            raise TimeoutError(f"run store write not done after {timeout}s")
        self._lock.release()
        if self._error is not None:
            raise self._error
        return self._value


#: What a fire-and-forget submit returns: nothing to wait for (see `_Lane.wait_idle`).
_DONE = _Waiter()
_DONE.set_result(None)


@dataclass(slots=True)
class _Op:
    kind: str  # queued | start | finish | progress
    params: Any  # a row dict (batched kinds) or a parameter tuple (progress)
    future: _Waiter | None  # None: fire and forget (kept and retried on failure)


class RunWriter:
    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        *,
        max_batch: int = 256,
        linger_ms: float = 10,
        finish_linger_ms: float = 0,
        start_linger_ms: float = 0,
        name: str = "jobfleet-run-writer",
        pooled: bool = False,
        on_fresh: Callable[[list[FreshRun]], None] | None = None,
    ) -> None:
        # linger_ms: how long the fast lane lets QUEUED rows (nobody waits for them) gather.
        # finish_linger_ms: the same for terminal outcomes on the durable lane, which only the
        # acker waits for (`Tracking`): one statement and one fsync for more runs, each acked
        # that much later. 0 for a writer whose callers wait for their outcomes themselves.
        # start_linger_ms: how long a start waits for other threads' starts, only while the
        # fast lane is busy (its last write ended less than twice that long ago), as
        # Postgres's commit_delay waits only when other transactions are active: under a
        # stream of jobs several starts share a statement; an idle worker's start is not held.
        # pooled: `connect` goes through a transaction-mode pooler (shared/db/connect.py).
        self._fast = _Lane(
            connect,
            durable=False,
            max_batch=max_batch,
            linger_s=linger_ms / 1000,
            start_linger_s=start_linger_ms / 1000,
            name=f"{name}-fast",
            pooled=pooled,
        )
        self._durable = _Lane(
            connect,
            durable=True,
            max_batch=max_batch,
            linger_s=0,
            finish_linger_s=finish_linger_ms / 1000,
            name=f"{name}-durable",
            pooled=pooled,
        )
        # on_fresh: told (job id, message id, queue, day) of each QUEUED row a batch inserted new,
        # once it is written: its job id's key is marked so that a worker may keep the run's
        # start in Redis (`broker/starts.py`).
        self._fast.on_fresh = on_fresh
        #: The latest rows refused for what they hold (most recent last), for operators/tests.
        self.refused: collections.deque[RowRefused] = collections.deque(maxlen=REFUSED_KEPT)
        self._fast.refused = self._durable.refused = self.refused
        #: How long a lease lasts unless renewed (`renew`); the tracking middleware sets it to
        #: the heartbeat timeout.
        self.lease_s = 5.0
        self._owner = ""
        self._owner_pid = -1
        self._owner_lock = threading.Lock()

    @property
    def healthy(self) -> bool:
        """False after a failed write, until a write succeeds again."""
        return self._fast.healthy and self._durable.healthy

    @property
    def last_error(self) -> str | None:
        return self._fast.last_error or self._durable.last_error

    @property
    def last_ok(self) -> float:
        """`time.monotonic()` of the last successful write (or `mark_ok`); 0 before any."""
        return max(self._fast.last_ok, self._durable.last_ok)

    @property
    def failed_at(self) -> float:
        """`time.monotonic()` of the last write that failed for an outage; 0 before any."""
        return max(self._fast.failed_at, self._durable.failed_at)

    def mark_ok(self) -> None:
        """Record that the store answered (a probe by the caller)."""
        self._fast.last_ok = time.monotonic()

    def start_run(
        self, info: MessageInfo, max_attempts: int, timeout: float = 30
    ) -> Started | Blocked | None:
        """RUNNING under this process's lease, unless the run is already COMPLETED, DEAD or
        CANCELED (then None) or RUNNING (then `Blocked`: see `takeover`)."""
        result: Started | Blocked | None = self.submit_start(info, max_attempts).result(timeout)
        return result

    @property
    def owner(self) -> str:
        """This process's name on the leases it holds (`host:pid:random`, made after a fork)."""
        pid = os.getpid()
        if self._owner_pid != pid:
            with self._owner_lock:  # one name per process, whichever thread asks first
                if self._owner_pid != pid:
                    self._owner = f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"
                    self._owner_pid = pid
        return self._owner

    def takeover(
        self, info: MessageInfo, max_attempts: int, timeout: float = 30
    ) -> Started | Blocked | None:
        """Start a RUNNING run whose lease ran out; a `Blocked`/None when it is no longer so."""
        row = {
            "j": info.job_id,
            "a": info.attempt,
            "ma": max_attempts,
            "m": info.message_id,
            "w": self.owner,
            "ls": self.lease_s,
        }
        result: Started | Blocked | None = self._fast.submit("takeover", row).result(timeout)
        return result

    def bury(self, job_id: str, error_code: str, error: str, timeout: float = 30) -> None:
        """DEAD, durably, a RUNNING run whose lease ran out (no new execution)."""
        self._durable.submit("bury", {"j": job_id, "ec": error_code, "er": error}).result(timeout)

    def release(self, job_ids: list[str], timeout: float = 10) -> set[str]:
        """Hand back runs of this process it will not finish (`RELEASE`); returns those it
        held and handed back."""
        if not job_ids:
            return set()
        params = {"ids": job_ids, "w": self.owner, "released": RELEASED}
        released: set[str] = self._durable.submit("release", params).result(timeout)
        return released

    def renew(self, job_ids: list[str], timeout: float = 10) -> set[str]:
        """Extend this process's leases on `job_ids`; returns those it still holds."""
        if not job_ids:
            return set()
        params = {"ls": self.lease_s, "ids": job_ids, "w": self.owner}
        held: set[str] = self._fast.submit("renew", params).result(timeout)
        return held

    def submit_start(
        self,
        info: MessageInfo,
        max_attempts: int,
        *,
        started_at: float | None = None,
        lease_until: float | None = None,
        owner: str | None = None,
        created_on: str | None = None,
    ) -> _Waiter:
        """`start_run` without waiting: `.result(timeout)` gives the `Started` (or None). A
        start kept in Redis is written with the time it began (`started_at`, epoch seconds)
        and its row's day when known (`created_on`); one found interrupted also with its owner
        and the lease it held (`lease_until`)."""
        row = self.start_row(
            info, max_attempts, started_at=started_at, owner=owner, created_on=created_on
        )
        row["ls"] = self.lease_s
        if lease_until is not None:
            row["lu"] = lease_until
        return self._fast.submit("start", row)

    def start_row(
        self,
        info: MessageInfo,
        max_attempts: int,
        *,
        started_at: float | None = None,
        owner: str | None = None,
        created_on: str | None = None,
    ) -> dict[str, Any]:
        """A run's START row (`START_MANY`'s keys), also carried by a `Finish` (`start`)."""
        return {
            "w": owner or self.owner,
            "st": started_at,
            "c": created_on,
            "o": info.org_id,
            "n": info.job_name,
            "j": info.job_id,
            "q": info.queue,
            "et": info.entity_type,
            "e": info.entity_id,
            "p": info.payload,
            "a": info.attempt,
            "ma": max_attempts,
            "rq": info.request_id,
            "m": info.message_id,
        }

    def record_queued(self, row: dict[str, Any]) -> None:
        """Fire and forget: the QUEUED row of a message that Redis already holds (keys of
        `QUEUED_MANY`: o n j q et e p r m t)."""
        self._fast.submit("queued", row, wait=False)

    def flush(self, timeout: float = 10) -> bool:
        """Wait until every QUEUED row handed over so far is written; False on timeout."""
        return self._fast.wait_idle(timeout)

    def finish_run(self, finish: Finish, timeout: float = 30) -> None:
        """Record an outcome; returns once it is durable (terminal) or written (non-terminal)."""
        self.submit_finish(finish).result(timeout)

    def submit_finish(self, finish: Finish) -> _Waiter:
        """Hand an outcome over without waiting; `.result(timeout)` waits (raises on failure)."""
        row = {
            "j": finish.job_id,
            "s": finish.status,
            "res": finish.result,
            "ec": finish.error_code,
            "er": finish.error,
            "nr": finish.next_retry_at.isoformat() if finish.next_retry_at else None,
            "fin": finish.terminal,
            "w": self.owner,
        }
        lane = self._durable if finish.terminal else self._fast
        if finish.start is not None:
            return lane.submit("finish_started", {**finish.start, **row})
        return lane.submit("finish", row)

    def progress(
        self, job_id: str, done: int, total: int, checkpoint: Any, timeout: float = 30
    ) -> bool | None:
        """Record progress (a checkpoint durably); True when an operator asked to cancel, None
        when this process no longer holds the run's lease (another execution took it over)."""
        params = (
            Jsonb({"done": done, "total": total}),
            Jsonb(checkpoint) if checkpoint is not None else None,
            job_id,
            self.owner,
        )
        lane = self._durable if checkpoint is not None else self._fast
        canceled: bool | None = lane.submit("progress", params).result(timeout)
        return canceled

    def close(self, timeout: float = 10) -> None:
        self._fast.close(timeout)
        self._durable.close(timeout)


def _job_id(op: _Op) -> str | None:
    if isinstance(op.params, dict):
        return op.params.get("j")
    if op.kind == "progress" and isinstance(op.params, tuple):
        return str(op.params[2])  # (progress, checkpoint, job id, lease owner)
    return op.params[-1] if isinstance(op.params, tuple) and op.params else None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    line: str = _scrub(text.splitlines()[0] if text else type(error).__name__)
    return line


def _blocked(conn: psycopg.Connection[Any], job_ids: list[str]) -> dict[str, Blocked | None]:
    """Why these starts were refused: None for a run that is finished or canceled (the
    delivery is skipped), a `Blocked` for a RUNNING one."""
    found: dict[str, Blocked | None] = {}
    for job_id, status, attempt, executions, live, remaining, owner in conn.execute(
        BLOCKED, (job_ids,)
    ).fetchall():
        if status == "RUNNING":
            found[job_id] = Blocked(
                bool(live), float(remaining), int(attempt), int(executions), owner
            )
        elif status in ("STAGED", "QUEUED", "FAILED"):  # changed meanwhile: try again shortly
            found[job_id] = Blocked(True, 0.0, int(attempt), int(executions))
        else:
            found[job_id] = None
    return found


def _rows(ops: Sequence[_Op]) -> str:
    """The batch as one JSON array of rows (`json_to_recordset` takes column names as keys).

    orjson: several times faster than `json.dumps`, in the writer thread that encodes every
    row of the process while holding the GIL its worker threads need. What it refuses (an
    integer beyond 64 bits, a lone surrogate, a key that is no string or number) and a payload
    or result holding NaN or an infinity (orjson would write null where `json.dumps` writes a
    literal Postgres refuses: the row is then set apart, as before) go through `json.dumps`."""
    rows = [op.params for op in ops]
    if not any(_has_non_finite(row) for row in rows):
        try:
            return orjson.dumps(rows, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            pass
    return json.dumps(rows, separators=(",", ":"), default=str)


def _job(op: _Op) -> str:
    """The job id of a batched row: statements take their rows in this order."""
    return str(op.params["j"])


def _finish_params(ops: Sequence[_Op]) -> tuple[str, list[str]]:
    """`FINISH_MANY`'s parameters: the rows, and their job ids for the index lookup."""
    return _rows(ops), [_job(op) for op in ops]


def _has_non_finite(row: Any) -> bool:
    """Does the payload (`p`) or result (`res`) of a row hold a float NaN or infinity? (The
    other fields are ids, names, numbers and times of the writer's own making.)"""
    if not isinstance(row, dict):
        return False
    stack = [row.get("p"), row.get("res")]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


class _Lane:
    """One writer thread, one connection, one transaction per batch."""

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        *,
        durable: bool,
        max_batch: int,
        linger_s: float,
        name: str,
        pooled: bool = False,
        finish_linger_s: float = 0,
        start_linger_s: float = 0,
    ) -> None:
        self._connect = connect
        self._durable = durable
        self._pooled = pooled
        self._max_batch = max_batch
        self._linger_s = linger_s
        self._finish_linger_s = finish_linger_s
        self._start_linger_s = start_linger_s
        #: `time.monotonic()` when the last batch was written (whatever its outcome).
        self._last_write = 0.0
        self._queue: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._conn: psycopg.Connection[Any] | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._started = False
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        # Fire-and-forget ops handed over and written so far (a failed write is retried, and
        # counted once, when it succeeds).
        self._submitted = 0
        self._written = 0
        self._retry_delay = 0.25
        self.retry_max_s = 5.0
        #: Called with the QUEUED rows a batch inserted new (`RunWriter(on_fresh=)`).
        self.on_fresh: Callable[[list[FreshRun]], None] | None = None
        self.healthy = True
        self.last_error: str | None = None
        self.last_ok = 0.0
        self.failed_at = 0.0
        self.refused: collections.deque[RowRefused] = collections.deque(maxlen=REFUSED_KEPT)

    def submit(self, kind: str, params: Any, *, wait: bool = True) -> _Waiter:
        if not self._started:
            with self._lock:
                if not self._started:
                    self._thread.start()
                    self._started = True
        if not wait:
            with self._lock:
                self._submitted += 1
            self._queue.put(_Op(kind, params, None))
            return _DONE
        future = _Waiter()
        self._queue.put(_Op(kind, params, future))
        return future

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the fire-and-forget ops handed over before this call are written (later
        ones do not hold it up)."""
        with self._idle:
            target = self._submitted
            return self._idle.wait_for(lambda: self._written >= target, timeout)

    def close(self, timeout: float) -> None:
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
            if op.future is None and self._linger_s:
                # Nobody waits for a QUEUED row: let a batch build up instead of paying a
                # transaction (and this thread's share of the GIL) per row; not when a whole
                # batch is waiting already. (Lingering then, a backlog was written at most
                # `max_batch` rows per linger: 256 per 10 ms + the statement, fewer rows per
                # second than a producer sends when Postgres takes 45+ µs a row, and the final
                # `flush` waited for the backlog.)
                if self._queue.qsize() < self._max_batch:
                    time.sleep(self._linger_s)
            elif op.kind == "finish" and self._finish_linger_s:
                # Terminal outcomes (this lane's finishes): let the other threads' gather.
                # Measured (bench/profile_worker.py): 2-3 runs per statement without, ~10 with
                # 10 ms; Postgres and the worker's own share of each write per run fall with it.
                time.sleep(self._finish_linger_s)
            elif (
                op.kind == "start"
                and self._start_linger_s
                and time.monotonic() - self._last_write < 2 * self._start_linger_s
            ):
                # Busy: the other threads' starts are on their way (bench/profile_worker.py:
                # 10-20 % more jobs/s at 0.5-1.5 ms). Idle (a job after a pause, a trickle):
                # the start goes at once, so the wake-up and paced latencies do not move.
                time.sleep(self._start_linger_s)
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
        try:
            self._flush_once(batch)
        finally:
            self._last_write = time.monotonic()

    def _flush_once(self, batch: Sequence[_Op]) -> None:
        # Each statement is its own transaction (pooled: the batch is one): when one fails,
        # those before it are written. Only the rest is written again: a start written twice
        # found its own run RUNNING under its own live lease and was told "run in flight".
        done: dict[int, Any] = {}
        for attempt in (1, 2):
            try:
                self._write(batch, done)
            except Exception as exc:  # a bug or an outage must not hang the caller threads
                self._reset()
                written = [op for op in batch if id(op) in done]
                self._deliver(written, [done[id(op)] for op in written])
                batch = [op for op in batch if id(op) not in done]
                if _refused_for_its_values(exc):
                    self._isolate(batch)
                    return
                transient = isinstance(
                    exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure
                )
                if attempt == 1 and transient:
                    continue
                self._failed(batch, exc)
                return
            self._done(batch, [done.get(id(op)) for op in batch])
            # After: a flush waits for the rows, not for this (a worker that takes a run before
            # its key is marked has its start written at once).
            if self.on_fresh is not None:
                self._tell_fresh([(op, done[id(op)]) for op in batch if op.kind == "queued"])
            return

    def _tell_fresh(self, queued: Sequence[tuple[_Op, Any]]) -> None:
        """Hand the QUEUED rows this batch inserted new (their result: the day of their row) to
        `on_fresh`; a failure there costs their workers a written start, nothing else."""
        fresh = [(op.params["j"], op.params["m"], op.params["q"], day) for op, day in queued if day]
        if not fresh or self.on_fresh is None:
            return
        try:
            self.on_fresh(fresh)
        except Exception as exc:
            log.warning("run_writer.fresh_not_marked", rows=len(fresh), error=str(exc)[:200])

    def _done(self, batch: Sequence[_Op], results: Sequence[Any]) -> None:
        self.healthy, self.last_error, self._retry_delay = True, None, 0.25
        self.last_ok = time.monotonic()
        self._deliver(batch, results)

    def _deliver(self, batch: Sequence[_Op], results: Sequence[Any]) -> None:
        written = 0
        for op, result in zip(batch, results, strict=True):
            if op.future is not None:
                op.future.set_result(result)
            else:
                written += 1
        self._count_written(written)

    def _count_written(self, written: int) -> None:
        if written:
            with self._idle:
                self._written += written
                self._idle.notify_all()

    def _isolate(self, batch: Sequence[_Op]) -> None:
        """Postgres refused something in `batch` for what it holds: write each row on its own,
        a refused row once more without what it cannot store, then set it apart."""
        for index, op in enumerate(batch):
            error: Exception
            try:
                self._done([op], self._write([op]))
                continue
            except Exception as exc:
                self._reset()
                if not _refused_for_its_values(exc):
                    self._failed(batch[index:], exc)  # an outage after all: as usual
                    return
                error = exc
            if op.kind != "queued":  # a QUEUED row: the worker records the run at its start
                retry = _Op(op.kind, _storable(op.kind, op.params, str(error)), op.future)
                try:
                    results = self._write([retry])
                except Exception as exc:
                    self._reset()
                    if not _refused_for_its_values(exc):
                        self._failed(batch[index:], exc)
                        return
                    error = exc
                else:
                    log.warning(
                        "run_writer.row_stored_without_unstorable_values",
                        job_id=_job_id(op),
                        kind=op.kind,
                        error=_first_line(error),
                    )
                    self._done([op], results)
                    continue
            self._refuse(op, error)

    def _refuse(self, op: _Op, error: Exception) -> None:
        refused = RowRefused(_job_id(op), op.kind, _first_line(error))
        self.refused.append(refused)
        log.error(
            "run_writer.row_refused", job_id=refused.job_id, kind=op.kind, error=refused.error
        )
        if op.future is not None:
            op.future.set_exception(refused)
        else:
            self._count_written(1)  # handled: `flush` must not wait for it

    def _failed(self, batch: Sequence[_Op], exc: Exception) -> None:
        self.healthy, self.last_error = False, str(exc)
        self.failed_at = time.monotonic()
        keep = [op for op in batch if op.future is None]
        for op in batch:
            if op.future is not None:
                op.future.set_exception(exc)
        if keep:
            log.error("run_writer.retrying", rows=len(keep), error=str(exc))
            time.sleep(self._retry_delay)
            self._retry_delay = min(self._retry_delay * 2, self.retry_max_s)
            for op in keep:
                self._queue.put(op)

    def _write(self, batch: Sequence[_Op], done: dict[int, Any] | None = None) -> list[Any]:
        """Write `batch`; the result of each op, also put in `done` (by `id(op)`) as soon as
        its statement is committed, so that a batch that fails halfway says what it wrote."""
        done = {} if done is None else done
        conn = self._connection()
        if not self._pooled:
            return self._statements(conn, batch, done)
        # Behind a transaction-mode pooler a session SET would stay on one server connection
        # and apply to other clients' transactions: the batch is one transaction that sets its
        # own commit mode (shared/db/connect.py).
        with conn.transaction():
            conn.execute(f"SET LOCAL synchronous_commit TO {'on' if self._durable else 'off'}")
            results = self._statements(conn, batch, {})
        done.update((id(op), result) for op, result in zip(batch, results, strict=True))
        return results

    def _statements(
        self,
        conn: psycopg.Connection[Any],
        batch: Sequence[_Op],
        results: dict[int, Any] | None = None,
    ) -> list[Any]:
        """One statement per kind of write in the batch, each its own (autocommit) transaction:
        the rows belong to different jobs and need no atomicity together. Each op's result
        goes into `results` once its statement has run."""
        results = {} if results is None else results
        by_kind: dict[str, list[_Op]] = {}
        for op in batch:
            by_kind.setdefault(op.kind, []).append(op)
        # Each statement takes its rows in job id order: a producer's QUEUED rows and a
        # worker's starts of the same jobs (started before their QUEUED row was written), in
        # opposite orders, each held some of the ids' index entries and waited for the other's
        # until Postgres's deadlock detection killed one a second later (both lanes stalled).
        if "queued" in by_kind:
            # One row per job id (ON CONFLICT DO UPDATE may touch a row once per statement).
            queued = sorted({op.params["j"]: op for op in by_kind["queued"]}.values(), key=_job)
            fresh = {
                (job_id, message_id): day.isoformat()
                for job_id, message_id, day in conn.execute(QUEUED_MANY, (_rows(queued),))
            }
            # The day of its row when this statement inserted (or re-queued) it, else None.
            results.update(
                (id(op), fresh.get((op.params["j"], op.params["m"]))) for op in by_kind["queued"]
            )
        if "finish" in by_kind:
            conn.execute(FINISH_MANY, _finish_params(sorted(by_kind["finish"], key=_job)))
            results.update((id(op), None) for op in by_kind["finish"])
        if "finish_started" in by_kind:
            # One row per job id, as for QUEUED rows (a second would be refused with the batch).
            rows = {op.params["j"]: op for op in reversed(by_kind["finish_started"])}
            conn.execute(FINISH_STARTED, (_rows(sorted(rows.values(), key=_job)),))
            results.update((id(op), None) for op in by_kind["finish_started"])
        if "start" in by_kind:
            self._starts(conn, by_kind["start"], results)
        for op in by_kind.get("takeover", ()):
            row = conn.execute(TAKEOVER, op.params).fetchone()
            if row is not None:
                results[id(op)] = Started(row[1], bool(row[2]), row[3], row[4])
            else:
                results[id(op)] = _blocked(conn, [op.params["j"]]).get(op.params["j"])
        for op in by_kind.get("bury", ()):
            conn.execute(BURY, op.params)
            results[id(op)] = None
        for op in by_kind.get("renew", ()):
            results[id(op)] = {row[0] for row in conn.execute(RENEW, op.params).fetchall()}
        for op in by_kind.get("release", ()):
            results[id(op)] = {row[0] for row in conn.execute(RELEASE, op.params).fetchall()}
        for op in by_kind.get("progress", ()):
            row = conn.execute(PROGRESS, op.params).fetchone()
            results[id(op)] = bool(row[0]) if row else None
        return [results.get(id(op)) for op in batch]

    def _starts(
        self, conn: psycopg.Connection[Any], ops: Sequence[_Op], results: dict[int, Any]
    ) -> None:
        """Start each job of `ops` once. A job id twice in one batch is one job delivered twice
        at once: the first delivery starts it and the others are skipped like any delivery of
        a run already under way, unless it was refused. Then its next delivery (another
        message: a canceled job sent again, whose canceled message arrived with its new one)
        is tried in turn; a refused delivery whose job a later one started is skipped (None),
        and only a job that no start takes is said why (`_blocked`)."""
        pending: dict[str, list[_Op]] = {}
        for op in ops:
            pending.setdefault(op.params["j"], []).append(op)
        refused: list[_Op] = []
        began: set[str] = set()
        while pending:
            tried = {job_id: waiting.pop(0) for job_id, waiting in pending.items()}
            rows = conn.execute(START_MANY, (_rows(sorted(tried.values(), key=_job)),)).fetchall()
            started = {
                job_id: Started(checkpoint, bool(cancel), attempt, execution)
                for job_id, checkpoint, cancel, attempt, execution in rows
            }
            for job_id, op in tried.items():  # written: said at once (the rest may fail below)
                if job_id in started:
                    results[id(op)] = started[job_id]
                    began.add(job_id)
                    for later in pending.pop(job_id):  # the first holds its lease now
                        results[id(later)] = Blocked(True, self._lease_s(later), 0, 0)
                else:
                    refused.append(op)
                    if not pending[job_id]:
                        del pending[job_id]
        # Refused, then started by a later delivery: this one was the message a cancel skips.
        for op in refused:
            if op.params["j"] in began:
                results[id(op)] = None
        refused = [op for op in refused if op.params["j"] not in began]
        if refused:
            why = _blocked(conn, sorted({op.params["j"] for op in refused}))
            for op in refused:
                results[id(op)] = why.get(op.params["j"])

    @staticmethod
    def _lease_s(op: _Op) -> float:
        return float(op.params.get("ls") or 0)

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            conn = self._connect()
            conn.autocommit = True
            if not self._pooled:  # pooled: SET LOCAL per batch (`_write`)
                conn.execute(f"SET synchronous_commit TO {'on' if self._durable else 'off'}")
                # Every statement is prepared at its first use and planned once, generically:
                # planning a batch cost 0.3 ms, as much as running it. That is safe because
                # each statement finds its runs through the job id index whatever the
                # statistics (an ON CONFLICT on it, or `job_id = ANY(...)`): a generic FINISH
                # joined on the batch alone scanned the whole table (6 ms a row at 150,000
                # rows). `test_run_writer` checks both plans on a table with stale statistics.
                # (Pooled: nothing is prepared, every execution is planned with its values.)
                conn.prepare_threshold = 0
                conn.execute("SET plan_cache_mode TO force_generic_plan")
            self._conn = conn
        return self._conn

    def _reset(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None
