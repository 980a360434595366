"""Which process each heartbeat is: a worker process's record, for the console's Nodes page.

Dramatiq's heartbeat (`<namespace>:__heartbeats__`) names a process by its broker id, a bare
UUID: a stale one says nothing of what it was. At boot each worker process records what it is
under that id, once, in the hash `<namespace>:jobfleet:nodes`: host, pid, service (its domain),
queues, threads, when it started, and the lease owner its run writer writes on the runs it
starts (`job_runs.lease_owner`), which links a RUNNING run to its process. Its last heartbeat
stays where Dramatiq keeps it: no command is added to a beat. At a clean shutdown the record
says when it stopped. A record whose process is gone from the heartbeats (Dramatiq's
maintenance removes a dead worker once its messages are requeued) is dropped by the next
process that boots, once it is older than `FORGET_AFTER_MS`.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from dramatiq.common import current_millis

#: A record absent from the heartbeats is dropped at another process's boot once it is older.
FORGET_AFTER_MS = 3_600_000


def nodes_key(namespace: str) -> str:
    """Hash: broker id -> JSON `Node`."""
    return f"{namespace}:jobfleet:nodes"


@dataclass(frozen=True)
class Node:
    id: str
    host: str
    pid: int
    service: str
    queues: list[str]
    threads: int
    started_ms: int
    lease_owner: str
    stopped_ms: int | None = None

    @classmethod
    def of(cls, raw: bytes | str) -> Node:
        return cls(**json.loads(raw))


def describe(broker: Any, worker: Any, *, service: str, lease_owner: str) -> Node:
    """This process, as its worker booted: the queues it consumes (delay queues left out)."""
    queues = sorted(q for q in getattr(worker, "consumers", {}) if not q.endswith(".DQ"))
    if not queues:
        queues = sorted(broker.get_declared_queues())
    return Node(
        id=str(broker.broker_id),
        host=socket.gethostname(),
        pid=os.getpid(),
        service=service,
        queues=queues,
        threads=int(getattr(worker, "worker_threads", 0)),
        started_ms=current_millis(),
        lease_owner=lease_owner,
    )


def register(client: Any, namespace: str, node: Node) -> None:
    """Record `node`, and drop the records of processes long gone from the heartbeats."""
    key = nodes_key(namespace)
    client.hset(key, node.id, json.dumps(asdict(node)))
    beating = {m.decode() for m in client.zrange(f"{namespace}:__heartbeats__", 0, -1)}
    old = current_millis() - FORGET_AFTER_MS
    gone = [
        k for k, v in client.hgetall(key).items()
        if k.decode() not in beating and k.decode() != node.id and Node.of(v).started_ms < old
    ]  # fmt: skip
    if gone:
        client.hdel(key, *gone)


def stopped(client: Any, namespace: str, node: Node) -> None:
    """Say that `node` stopped cleanly (its heartbeat goes stale, then Dramatiq drops it)."""
    done = Node(**{**asdict(node), "stopped_ms": current_millis()})
    client.hset(nodes_key(namespace), node.id, json.dumps(asdict(done)))


def read(client: Any, namespace: str) -> list[Node]:
    return [Node.of(v) for v in client.hgetall(nodes_key(namespace)).values()]


def recorder(
    service: str, lease_owner: Callable[[], str]
) -> tuple[Callable[[Any, Any], None], Callable[[Any], None]]:
    """(on boot, on shutdown) for the heartbeat middleware: each logs and swallows a Redis
    error (a missing record costs the Nodes page an explanation, never the worker its start)."""
    import structlog

    log = structlog.get_logger("jobfleet.nodes")
    mine: list[Node] = []

    def on_boot(broker: Any, worker: Any) -> None:
        try:
            node = describe(broker, worker, service=service, lease_owner=lease_owner())
            register(broker.client, broker.namespace, node)
            mine.append(node)
        except Exception as exc:
            log.warning("nodes.register_failed", error=str(exc))

    def on_stop(broker: Any) -> None:
        for node in mine:
            try:
                stopped(broker.client, broker.namespace, node)
            except Exception as exc:
                log.warning("nodes.stop_failed", error=str(exc))

    return on_boot, on_stop
