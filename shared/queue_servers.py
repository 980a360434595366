"""Which Redis carries each queue: queues sharded over several Redis primaries.

One Redis primary carries ~3,000 jobs/s (docs/scaling.md); past that, queues move to primaries of
their own: `REDIS_QUEUE_URLS='{"<queue>": "redis://redis-<queue>:6379/0", ...}'`. A queue not listed
is on `REDIS_URL` (the "home" server, which also keeps what belongs to no queue: the scheduler's
locks and records, rate limits). With `REDIS_SENTINELS`, each listed queue names the master that
serves it (`REDIS_QUEUE_SENTINEL_MASTERS`); its URL gives the connection options, as REDIS_URL
does for the home master.

Everything of one queue is on its server, so that every Redis step of a job stays one atomic
script on one server: its messages, delayed and dead-letter sets, wake list, the dedup keys of its
jobs (claimed by the same script that enqueues), its pause, and the heartbeats of the workers that
consume it (a worker process's broker talks to its queues' server only: its queues must share one).
Producers (send, the outbox relay, replays) route each message by its queue; `fleet status`, the
console's queues page, pause/resume and the scheduler's backlog read each queue where it lives.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import redis

from . import redis_conn
from .config import Settings
from .errors import FleetError

#: A server: its URL, and the Sentinel master serving it (None without Sentinels).
Server = tuple[str, str | None]


class QueuesOnSeveralServers(FleetError):
    """A worker process's queues must share one Redis server (REDIS_QUEUE_URLS)."""

    code = "CONFIG"


def server_of(settings: Settings, queue: str | None) -> Server:
    """The server that carries `queue` (None: the home server, REDIS_URL)."""
    url = settings.redis_queue_urls.get(queue, settings.redis_url) if queue else settings.redis_url
    if not settings.redis_sentinels:
        return url, None
    master = settings.redis_sentinel_master
    if queue:
        master = settings.redis_queue_sentinel_masters.get(queue, master)
    return url, master


def label(server: Server) -> str:
    """How `fleet status` and the console name a server: `host:port/db`, or the Sentinel
    master's name (never a password)."""
    url, master = server
    if master:
        return f"sentinel master {master}"
    parts = urlsplit(url)
    db = parts.path.strip("/") or "0"
    return f"{parts.hostname}:{parts.port or 6379}/{db}"


def servers(settings: Settings) -> list[Server]:
    """Every server of the fleet's queues: the home one first, then each other one once."""
    found = [server_of(settings, None)]
    for queue in sorted({*settings.redis_queue_urls, *settings.redis_queue_sentinel_masters}):
        server = server_of(settings, queue)
        if server not in found:
            found.append(server)
    return found


def common_server(settings: Settings, queues: Iterable[str]) -> Server:
    """The one server of `queues` (a worker process's); `QueuesOnSeveralServers` otherwise."""
    by_server: dict[Server, list[str]] = {}
    for queue in queues:
        by_server.setdefault(server_of(settings, queue), []).append(queue)
    if len(by_server) > 1:
        from .cli.settings import redact_url

        where = "; ".join(
            f"{', '.join(qs)} on {redact_url(url)}{f' ({master})' if master else ''}"
            for (url, master), qs in by_server.items()
        )
        raise QueuesOnSeveralServers(
            f"a worker process's queues must share one Redis server (REDIS_QUEUE_URLS): {where}"
        )
    return next(iter(by_server), server_of(settings, None))


class QueueServers:
    """One client per server, made on first use; `reuse`: clients already made (a broker's, for
    its server), used for every queue on their server and never closed here."""

    def __init__(
        self,
        settings: Settings,
        *,
        reuse: Mapping[Server, redis.Redis] | None = None,
        **options: Any,
    ) -> None:
        self.settings = settings
        self._options = options
        self._lock = threading.Lock()
        self._reused = dict(reuse or {})
        self._clients: dict[Server, redis.Redis] = dict(self._reused)
        self._own: list[redis.Redis] = []

    @property
    def sharded(self) -> bool:
        return len(servers(self.settings)) > 1

    def client(self, queue: str | None = None) -> redis.Redis:
        """The client of the server that carries `queue` (None: the home server)."""
        return self._client(server_of(self.settings, queue))

    def _client(self, server: Server) -> redis.Redis:
        found = self._clients.get(server)
        if found is None:
            with self._lock:
                found = self._clients.get(server)
                if found is None:
                    url, master = server
                    found = redis_conn.client(
                        self.settings, url=url, master=master, **self._options
                    )
                    self._clients[server] = found
                    self._own.append(found)
        return found

    def all(self) -> list[redis.Redis]:
        """A client of every server (the home one first)."""
        return [self._client(server) for server in servers(self.settings)]

    def by_server(self, queues: Iterable[str]) -> list[tuple[redis.Redis, list[str]]]:
        """`queues` grouped by the server that carries them, in first-seen order."""
        groups: dict[Server, list[str]] = {}
        for queue in queues:
            groups.setdefault(server_of(self.settings, queue), []).append(queue)
        return [(self._client(server), qs) for server, qs in groups.items()]

    def close(self) -> None:
        """Close the clients this made (not `home`)."""
        with self._lock:
            for client in self._own:
                client.close()
            self._own.clear()
            self._clients = dict(self._reused)
