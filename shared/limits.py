"""Concurrency limits of a queue, fleet-wide: its running jobs in all, and per org.

Three limits, each counted over every worker process of the queue (`broker/lanes.py`: each
message a fetch takes counts in `<queue>.busy` until it is acknowledged, requeued or
dead-lettered, or its worker is found dead):
- `queue`: running jobs of the queue (`fleet queues limit QUEUE N`);
- `per-org`: running jobs of any one org (`ORG_CONCURRENCY`, or `--per-org`);
- one org's own (`ORG_CONCURRENCY_OVERRIDES`, or `--org ORG`).
Operators' limits live in Redis (`<namespace>:jobfleet:limits:<queue>`) and win over the
settings; each change is audited in `pause_audit` (action `limit`) like a pause. A job over a
limit stays in its lane, unfetched: it spends no attempt, and starts when a slot frees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

import redis
import structlog

from .broker import lanes
from .config import Settings
from .errors import FleetError
from .pauses import _known, audit, queue_client

if TYPE_CHECKING:
    from .runtime import Runtime

log = structlog.get_logger("jobfleet.limits")


class InvalidLimit(FleetError, ValueError):
    """A limit is a whole number of running jobs, at least 1."""

    code = "INVALID_LIMIT"


@dataclass(frozen=True)
class QueueLimits:
    """A queue's limits in force (None: none) and its running jobs."""

    queue: str
    limit: int | None
    per_org: int | None
    orgs: dict[str, int]
    running: int
    running_by_org: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "limit": self.limit,
            "per_org": self.per_org,
            "orgs": self.orgs,
            "running": self.running,
            "running_by_org": self.running_by_org,
        }


def _field(org: UUID | None, per_org: bool) -> tuple[str, str]:
    if org is not None and per_org:
        raise InvalidLimit("name either one org (--org) or every org (--per-org), not both")
    if org is not None:
        return f"org:{org}", f"org {org}"
    return ("org", "per org") if per_org else ("queue", "queue")


def set_limit(
    runtime: Runtime,
    queue: str,
    limit: int | None,
    *,
    by: str,
    reason: str,
    org: UUID | None = None,
    per_org: bool = False,
    known: Sequence[str] | None = None,
) -> tuple[int | None, int | None]:
    """Set (None: lift) a limit of `queue`: the queue's own, every org's (`per_org`) or one
    org's; audited when it changed. Returns (before, after) in Redis. Fetches obey it at once."""
    _known(queue, known)
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise InvalidLimit(f"invalid limit {limit!r}: a whole number of running jobs, at least 1")
    field, what = _field(org, per_org)
    client = queue_client(runtime, queue)  # the Redis that carries it (REDIS_QUEUE_URLS)
    key = lanes.limits_key(runtime.settings.broker_namespace, queue)
    pipe = client.pipeline(transaction=True)
    pipe.hget(key, field)
    if limit is None:
        pipe.hdel(key, field)
    else:
        pipe.hset(key, field, limit)
    raw, _ = pipe.execute()
    before = int(raw) if raw else None
    if before != limit:
        log.info("queue.limit_set", queue=queue, scope=what, limit=limit, before=before, by=by)
        audit(
            runtime,
            kind="queue",
            target=queue,
            action="limit",
            by=by,
            reason=f"{what}: {_shown(before)} -> {_shown(limit)}"
            + (f"; {reason}" if reason else ""),
        )
    return before, limit


def _shown(limit: int | None) -> str:
    return "none" if limit is None else str(limit)


def queue_limits(client: redis.Redis, settings: Settings, queue: str) -> QueueLimits:
    """The limits in force on `queue` (Redis's over the settings') and its running jobs;
    `client` is the Redis that carries `queue` (`QueueServers.client`)."""
    raw: dict[bytes, bytes] = client.hgetall(  # type: ignore[assignment]
        lanes.limits_key(settings.broker_namespace, queue)
    )
    stored = {k.decode(): int(v) for k, v in raw.items() if int(v) > 0}
    orgs = {org: n for org, n in settings.org_concurrency_overrides.get(queue, {}).items() if n > 0}
    orgs.update({k.removeprefix("org:"): n for k, n in stored.items() if k.startswith("org:")})
    busy = lanes.busy(client, settings.broker_namespace, queue)
    return QueueLimits(
        queue=queue,
        limit=stored.get("queue"),
        per_org=stored.get("org") or settings.org_concurrency.get(queue) or None,
        orgs=dict(sorted(orgs.items())),
        running=busy.pop("*", 0),
        running_by_org=dict(sorted(busy.items(), key=lambda kv: (-kv[1], kv[0]))),
    )


def summary(limits: Mapping[str, Any], *, busiest: bool = True) -> str:
    """`queue 8, per org 2, 1 org(s) own, busiest org 6f1c2a3e: 2 running` from a
    `QueueLimits.as_dict()`; empty when the queue has no limit. `busiest=False` names no org
    (the console, whose operator may see only some orgs)."""
    parts = []
    if limits.get("limit"):
        parts.append(f"queue {limits['limit']}")
    if limits.get("per_org"):
        parts.append(f"per org {limits['per_org']}")
    if limits.get("orgs"):
        parts.append(f"{len(limits['orgs'])} org(s) own")
    by_org = limits.get("running_by_org") or {}
    if busiest and parts and by_org:
        top, n = next(iter(by_org.items()))
        parts.append(f"busiest org {top[:8]}: {n} running")
    return ", ".join(parts)
