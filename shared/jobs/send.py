"""The producer path: validate, derive the job id, deduplicate, record QUEUED, enqueue.

The QUEUED row and the enqueue happen in one Postgres transaction that commits after Redis
accepted the message: the unique `job_id` makes a concurrent second send wait for the first and
then answer `duplicate=True`; a Redis failure rolls the row back, so nothing is half-sent. The
checks run before the broker is called, never in a `before_enqueue` hook, because Dramatiq
swallows plain exceptions raised by hooks (DESIGN §3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
import redis
from psycopg.types.json import Jsonb

from ..contracts.base import Payload
from ..errors import BrokerUnavailable, TrackingUnavailable
from .context import request_id_var
from .message import build_message

if TYPE_CHECKING:
    import dramatiq
    from psycopg_pool import ConnectionPool

    from .spec import JobSpec

INSERT_QUEUED = """
INSERT INTO job_runs (org_id, job_name, job_id, queue, status, entity_type, entity_id,
                      payload, attempt, request_id, message_id, queued_at)
VALUES (%s, %s, %s, %s, 'QUEUED', %s, %s, %s, 0, %s, %s, now())
ON CONFLICT (job_id) DO NOTHING
RETURNING message_id
"""
SELECT_EXISTING = "SELECT message_id, status FROM job_runs WHERE job_id = %s"


@dataclass(frozen=True)
class SendResult:
    job_id: str
    message_id: str | None
    duplicate: bool
    status: str


class Sender:
    def __init__(self, broker: dramatiq.Broker, pool: ConnectionPool) -> None:
        self.broker = broker
        self.pool = pool

    def send(
        self,
        spec: JobSpec[Any],
        payload: Payload | Mapping[str, Any],
        *,
        request_id: str | None = None,
        delay_ms: int | None = None,
    ) -> SendResult:
        model = spec.build(payload)  # PayloadError before Redis or Postgres is touched
        job_id = spec.job_id(model)
        entity_id = spec.entity_id(model) or None
        request_id = request_id or request_id_var.get()
        message = build_message(
            job_name=spec.name,
            queue=spec.queue,
            payload=model.wire(),
            job_id=job_id,
            org_id=model.org_id,
            entity_type=spec.entity_type,
            entity_id=entity_id,
            request_id=request_id,
        )
        params = (
            model.org_id,
            spec.name,
            job_id,
            spec.queue,
            spec.entity_type,
            entity_id,
            Jsonb(message.args[0]),
            request_id,
            message.message_id,
        )
        try:
            with self.pool.connection() as conn:
                row = conn.execute(INSERT_QUEUED, params).fetchone()
                if row is None:
                    existing = conn.execute(SELECT_EXISTING, (job_id,)).fetchone()
                    message_id, status = existing if existing else (None, "UNKNOWN")
                    return SendResult(job_id, message_id, duplicate=True, status=status)
                try:
                    self.broker.enqueue(message, delay=delay_ms)
                except redis.RedisError as exc:
                    raise BrokerUnavailable(f"cannot enqueue {job_id}: {exc}") from exc
        except psycopg.Error as exc:
            raise TrackingUnavailable(f"cannot record {job_id}: {exc}") from exc
        return SendResult(job_id, message.message_id, duplicate=False, status="QUEUED")
