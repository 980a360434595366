"""Lanes: fair share between orgs, priorities and concurrency limits, on Dramatiq's Redis layout.

Each message of a queue waits in a lane, one list per priority and org
(`<queue>.lane.<h|d|l>/<org>`), or in the queue's own list, the default lane (a sender that names
no lane, Dramatiq's requeues). `lua/enqueue_once.lua` puts a message in its lane and ranks a lane
that was empty in `<queue>.ready`; `lua/fetch.lua` picks one message at a time: the priority by
weighted turns (high 6, default 3, low 1 in ten picks; a turn with nothing to take goes to the
next priority), then the lane of that priority served longest ago whose org is under its limit.
Each message taken counts in `<queue>.busy` (per org and in all, `*`) and in the worker's held
hash until it is acknowledged, requeued or dead-lettered (`lua/ack_many.lua`, `lua/release.lua`);
a dead worker's slots are given back in the heartbeat maintenance that requeues its messages.
docs/kernel.md ("Fair share, limits and priorities") states the bounds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import redis
from dramatiq.common import current_millis

from ..jobs.priorities import PRIORITIES
from .scripts import source

RELEASE = source("release.lua")
#: The send script (`gate.py`), also Dramatiq's own enqueues' (`enqueue`).
ENQUEUE = source("enqueue_once.lua")


def limits_key(namespace: str, queue: str) -> str:
    """Hash of a queue's limits set by operators (`fleet queues limit`): `queue` (running jobs
    of the queue, fleet-wide), `org` (per org, every org), `org:<org id>` (that org)."""
    return f"{namespace}:jobfleet:limits:{queue}"


def busy_key(namespace: str, queue: str) -> str:
    """Hash: org id -> messages of the queue taken and not yet acknowledged; `*`: all of them."""
    return f"{namespace}:{queue}.busy"


def lane(options: Mapping[str, Any]) -> tuple[str, str]:
    """The lane arguments of `lua/enqueue_once.lua` (priority, org) for a message's options."""
    priority = options.get("priority") or "default"
    if priority not in PRIORITIES:
        priority = "default"
    return str(priority), str(options.get("org_id") or "")


def settings_limits(
    per_org: Mapping[str, int], overrides: Mapping[str, Mapping[str, int]]
) -> dict[str, str]:
    """Queue -> the JSON `lua/fetch.lua` reads the settings' limits from."""
    return {
        queue: json.dumps({"org": per_org.get(queue, 0), "orgs": dict(overrides.get(queue, {}))})
        for queue in sorted(set(per_org) | set(overrides))
    }


def _script(broker: Any, name: str, text: str) -> Any:
    script = broker.__dict__.get(name)
    if script is None:
        script = broker.__dict__[name] = broker.client.register_script(text)
    return script


def enqueue(broker: Any, queue_name: str, redis_id: str, data: bytes) -> None:
    """Dramatiq's "enqueue" command, into the lane the message's options name."""
    try:
        options = orjson.loads(data).get("options") or {}
    except (orjson.JSONDecodeError, AttributeError):  # another encoder: the default lane
        options = {}
    priority, org = lane(options) if isinstance(options, dict) else ("", "")
    full = f"{broker.namespace}:{queue_name}"
    _script(broker, "fleet_enqueue", ENQUEUE)(
        keys=[f"{full}.unclaimed", f"{full}.msgs", full, f"{full}.wake"],
        args=["", 0, redis_id, data, priority, org],
    )


def release(broker: Any, queue_name: str, redis_ids: Sequence[str] | None) -> int:
    """Give back the slots `redis_ids` hold (this worker's), or, with None, those of every dead
    holder of the queue. Delay queues hold no slots."""
    if queue_name.endswith(".DQ") or (redis_ids is not None and not redis_ids):
        return 0
    script = _script(broker, "fleet_release", RELEASE)
    args = [queue_name, broker.broker_id, current_millis(), broker.heartbeat_timeout]
    return int(script(keys=[broker.namespace], args=[*args, *(redis_ids or ())]))


def busy(client: redis.Redis, namespace: str, queue: str) -> dict[str, int]:
    """Org id -> running (taken, unacknowledged) messages of `queue`; `*`: all of them."""
    raw: dict[bytes, bytes] = client.hgetall(busy_key(namespace, queue))  # type: ignore[assignment]
    return {k.decode(): int(v) for k, v in raw.items() if int(v) > 0}


def ready(client: redis.Redis, namespace: str, queues: Sequence[str]) -> dict[str, int]:
    """Queue -> messages waiting in it: its own list (the default lane) and a token in
    `<queue>.laned` per message waiting in another lane. One round trip."""
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.llen(f"{namespace}:{queue}")
        pipe.llen(f"{namespace}:{queue}.laned")
    replies = pipe.execute()
    return {queue: int(replies[2 * i]) + int(replies[2 * i + 1]) for i, queue in enumerate(queues)}
