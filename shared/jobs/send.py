"""The producer path: validate, derive the job id, deduplicate and enqueue, record QUEUED.

Dedup and enqueue are one atomic Redis call (`shared/broker/gate.py`), so a send costs about what a
bare Dramatiq enqueue costs. The QUEUED row is handed to a group-commit writer and written within
milliseconds (`run_writer.py`); a worker that starts the job first creates the row itself. When
that writer cannot reach Postgres, new sends raise `TrackingUnavailable` before anything is
enqueued; the first send of a process checks that the database is migrated (else
`SchemaNotMigrated`: "database not migrated: run `fleet db upgrade`"). The checks run before the
broker is called, never in a `before_enqueue` hook: Dramatiq swallows plain exceptions raised by
hooks (DESIGN §3).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
import redis

from ..broker import EnqueueGate
from ..contracts.base import Payload
from ..db import schema
from ..errors import BrokerUnavailable, TrackingUnavailable
from .context import request_id_var
from .message import build_message
from .priorities import check_priority
from .run_writer import RunWriter

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from .spec import JobSpec

SELECT_EXISTING = "SELECT status FROM job_runs WHERE job_id = %s"
#: A producer whose writer has not reached Postgres for this long checks before sending.
PROBE_AFTER_S = 1.0


#: Not slotted: a product may read it as a dict (`fleet jobs send --json` prints `__dict__`;
#: slotted, that raised AttributeError), and slots saved ~1 µs of a ~150 µs send.
@dataclass(frozen=True)
class SendResult:
    job_id: str
    message_id: str | None
    duplicate: bool
    status: str


class Sender:
    def __init__(self, gate: EnqueueGate, writer: RunWriter, pool: ConnectionPool) -> None:
        self.gate = gate
        self.writer = writer
        self.pool = pool
        #: The database had every migration head when last checked (see `db/schema.py`).
        self._migrated = False

    def send(
        self,
        spec: JobSpec[Any],
        payload: Payload | Mapping[str, Any],
        *,
        request_id: str | None = None,
        delay_ms: int | None = None,
        priority: str | None = None,
    ) -> SendResult:
        # PayloadError (or UnknownPriority) before Redis or Postgres is touched
        priority = check_priority(priority) if priority is not None else spec.priority
        model, wire = spec.contract.build_wire(payload)
        entity = spec.entity_id(model)
        job_id = spec.job_id(model, wire, entity_id=entity)
        self._check_tracking(job_id)
        if spec.requires is not None:
            self._check_requires(spec, model)
        entity_id = entity or None
        request_id = request_id or request_id_var.get()
        message = build_message(
            job_name=spec.name,
            queue=spec.queue,
            payload=wire,
            job_id=job_id,
            org_id=wire.get("org_id", model.org_id),  # its text, made once by the wire
            entity_type=spec.entity_type,
            entity_id=entity_id,
            request_id=request_id,
            priority=priority,
        )
        try:
            holder = self.gate.enqueue_once(message, job_id, delay_ms=delay_ms)
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"cannot enqueue {job_id}: {exc}") from exc
        if holder is not None:
            return SendResult(job_id, holder, duplicate=True, status=self._status(job_id))
        self.writer.record_queued(
            {
                "o": model.org_id,
                "n": spec.name,
                "j": job_id,
                "q": spec.queue,
                "et": spec.entity_type,
                "e": entity_id,
                "p": message.args[0],
                "r": request_id,
                "m": message.message_id,
                "t": message.options["sent_at"],
            }
        )
        return SendResult(job_id, message.message_id, duplicate=False, status="QUEUED")

    def _check_requires(self, spec: JobSpec[Any], model: Payload) -> None:
        """`PayloadError` when the row the job's worker needs is not there (`requires.py`)."""
        requires = spec.requires
        assert requires is not None
        try:
            with self.pool.connection() as conn:
                found = conn.execute(requires.sql(), requires.params(model)).fetchone()
        except psycopg.Error as exc:
            raise TrackingUnavailable(
                f"cannot check {spec.name}'s {requires.table}: {exc}"
            ) from exc
        if found is None:
            raise requires.missing(spec.name, model)

    def check_broker(self, what: str, queue: str | None = None) -> None:
        """`BrokerUnavailable` unless Redis (the server of `queue`) answers a PING (a staging
        `at_commit` asks before anything is written: a caller that chose to publish at its
        commit hears of an outage in its request, not later)."""
        try:
            (self.gate.broker.client if queue is None else self.gate.client(queue)).ping()
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"cannot publish {what}: {exc}") from exc

    def _check_tracking(self, job_id: str) -> None:
        """Fail loudly, before anything is enqueued, when the run store is unreachable.

        The writer knows from its last write; when it has not written for `PROBE_AFTER_S`
        (an idle producer, a fresh process), a `SELECT 1` asks. Sends in a steady stream keep
        the writer fresh, so the probe costs nothing on the hot path.
        """
        if not self.writer.healthy:
            if "does not exist" in (self.writer.last_error or ""):
                self._migrated = False  # a table is missing: say why, not "unavailable"
            else:
                raise TrackingUnavailable(f"cannot record {job_id}: {self.writer.last_error}")
        if self._migrated and time.monotonic() - self.writer.last_ok < PROBE_AFTER_S:
            return
        try:
            with self.pool.connection() as conn:
                if self._migrated:
                    conn.execute("SELECT 1")
                else:
                    # Once per process: a send to an unmigrated database used to retry
                    # `relation "job_runs" does not exist` and then enqueue an untracked job.
                    schema.check(conn)
        except psycopg.Error as exc:
            raise TrackingUnavailable(f"cannot record {job_id}: {exc}") from exc
        self._migrated = True
        if not self.writer.healthy:  # migrated, but its writes still fail: not recorded
            raise TrackingUnavailable(f"cannot record {job_id}: {self.writer.last_error}")
        self.writer.mark_ok()

    def flush(self, timeout: float = 10) -> bool:
        """Wait until the QUEUED rows of every send so far are written."""
        return self.writer.flush(timeout)

    def _status(self, job_id: str) -> str:
        try:
            with self.pool.connection() as conn:
                row = conn.execute(SELECT_EXISTING, (job_id,)).fetchone()
        except psycopg.Error:
            return "UNKNOWN"
        return str(row[0]) if row else "QUEUED"
