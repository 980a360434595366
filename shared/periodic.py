"""Operator control of the scheduler's periodic jobs: pause, resume, run now, last runs.

Domain-blind: the scheduler names its jobs; this module keeps, in Redis (shared by every
scheduler replica and by `fleet schedule`):
- `<ns>:jobfleet:schedule:paused`  hash job -> JSON {by, reason, at}: a paused job's runs are
  skipped (each skip counted as outcome `paused`) until it is resumed; restarts keep it;
- `<ns>:jobfleet:schedule:run-now` hash job -> JSON {by, at}: a request to run a job once, now.
  Each replica polls it; the one whose HDEL removes the field runs the job (once, whatever the
  number of replicas), through the same code and locks as its periodic runs, paused or not;
- `<ns>:jobfleet:schedule:runs`    hash job -> JSON {at, outcome, detail, duration_ms, next_at,
  by}: the last run of each job (`detail`: what the job said of it, e.g. `paused`
  while the system the job drives is paused on its own side) and the next one planned.
Pause, resume and run-now are audited in `pause_audit` (kind `schedule`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis
import structlog

from .errors import FleetError
from .pauses import audit, redis_client

if TYPE_CHECKING:
    from .runtime import Runtime

log = structlog.get_logger("jobfleet.periodic")


def _key(namespace: str, what: str) -> str:
    return f"{namespace}:jobfleet:schedule:{what}"


class UnknownPeriodicJob(FleetError):
    """The scheduler has no periodic job of that name."""

    code = "UNKNOWN_PERIODIC_JOB"


def _check(job: str, known: Sequence[str]) -> None:
    if job not in known:
        raise UnknownPeriodicJob(f"unknown periodic job {job!r}; known: {', '.join(known)}")


@dataclass(frozen=True)
class JobState:
    name: str
    paused: dict[str, Any] | None
    last: dict[str, Any] | None
    run_now_requested: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "paused": self.paused,
            "last": self.last,
            "run_now_requested": self.run_now_requested,
        }


def _hash(client: redis.Redis, key: str) -> dict[str, dict[str, Any]]:
    raw: dict[bytes, bytes] = client.hgetall(key)  # type: ignore[assignment]
    return {k.decode(): json.loads(v) for k, v in raw.items()}


def states(client: redis.Redis, namespace: str, jobs: Sequence[str]) -> list[JobState]:
    pipe = client.pipeline(transaction=False)
    for what in ("paused", "runs", "run-now"):
        pipe.hgetall(_key(namespace, what))
    paused, runs, asked = (
        {k.decode(): json.loads(v) for k, v in raw.items()} for raw in pipe.execute()
    )
    return [JobState(job, paused.get(job), runs.get(job), job in asked) for job in jobs]


def paused_jobs(client: redis.Redis, namespace: str) -> set[str]:
    return {k.decode() for k in client.hkeys(_key(namespace, "paused"))}  # type: ignore[union-attr]


def record_run(
    client: redis.Redis,
    namespace: str,
    job: str,
    *,
    at: datetime,
    outcome: str,
    duration_ms: float,
    next_at: datetime | None,
    by: str | None = None,
    detail: str | None = None,
) -> None:
    entry = {
        "detail": detail,
        "at": at.isoformat(),
        "outcome": outcome,
        "duration_ms": round(duration_ms, 1),
        "next_at": next_at.isoformat() if next_at else None,
        "by": by,
    }
    client.hset(_key(namespace, "runs"), job, json.dumps(entry))


def claim_run_now(client: redis.Redis, namespace: str) -> list[tuple[str, str]]:
    """The run-now requests this replica won: (job, who asked). Each request is won by exactly
    one caller (HDEL removes a field once)."""
    key = _key(namespace, "run-now")
    won = []
    for job, raw in _hash(client, key).items():
        if client.hdel(key, job):
            won.append((job, str(raw.get("by", ""))))
    return won


# -- Operator actions (CLI, API, console) -----------------------------------------------------


def pause(runtime: Runtime, job: str, *, by: str, reason: str, known: Sequence[str]) -> bool:
    """Pause a periodic job in every replica; True when this call paused it."""
    _check(job, known)
    fields = {"by": by, "reason": reason, "at": datetime.now(UTC).isoformat()}
    client = redis_client(runtime)
    if not client.hsetnx(
        _key(runtime.settings.broker_namespace, "paused"), job, json.dumps(fields)
    ):
        return False
    log.warning("schedule.paused", job=job, by=by, reason=reason)
    audit(runtime, kind="schedule", target=job, action="pause", by=by, reason=reason)
    return True


def resume(runtime: Runtime, job: str, *, by: str, reason: str = "", known: Sequence[str]) -> bool:
    _check(job, known)
    if not redis_client(runtime).hdel(_key(runtime.settings.broker_namespace, "paused"), job):
        return False
    log.warning("schedule.resumed", job=job, by=by, reason=reason)
    audit(runtime, kind="schedule", target=job, action="resume", by=by, reason=reason)
    return True


def run_now(runtime: Runtime, job: str, *, by: str, reason: str = "", known: Sequence[str]) -> None:
    """Ask the scheduler replicas to run `job` once, now (within about a second)."""
    _check(job, known)
    fields = {"by": by, "at": datetime.now(UTC).isoformat()}
    redis_client(runtime).hset(
        _key(runtime.settings.broker_namespace, "run-now"), job, json.dumps(fields)
    )
    log.info("schedule.run_now_requested", job=job, by=by)
    audit(runtime, kind="schedule", target=job, action="run-now", by=by, reason=reason)
