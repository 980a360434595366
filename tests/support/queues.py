"""What waits in a queue, across its lanes (shared/broker/lanes.py): a message sent by the fleet
waits in its org's lane, not in the queue's own list."""

from __future__ import annotations

from typing import Any

from shared.broker import lanes


def queued(client: Any, namespace: str, queue: str) -> int:
    """Messages waiting in `queue` (every lane)."""
    return lanes.ready(client, namespace, [queue])[queue]


def queued_ids(client: Any, namespace: str, queue: str) -> list[str]:
    """The Redis ids waiting in `queue`: its own list, then each other lane's."""
    keys = [f"{namespace}:{queue}"] + [
        f"{namespace}:{queue}.lane.{m.decode()}"
        for m in client.zrange(f"{namespace}:{queue}.ready", 0, -1)
        if m != b"d/"
    ]
    return [i.decode() for key in keys for i in client.lrange(key, 0, -1)]
