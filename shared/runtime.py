"""The composition root of a process: settings, broker, database pools and the sender.

Built lazily on first use (never at import time); a worker's bootstrap or a test installs its
own with `set_runtime`.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING

from .config import Settings, get_settings

if TYPE_CHECKING:
    import dramatiq
    from psycopg_pool import ConnectionPool
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from .broker.starts import RunStarts
    from .jobs.run_writer import RunWriter
    from .jobs.send import Sender
    from .queue_servers import QueueServers


#: Default size of a process's Postgres pool by its kind (DB_POOL_SIZE overrides it): a worker's
#: threads each hold one at most, plus the lease renewals and probes; the scheduler's jobs run
#: a few at a time. Was 16 for every process: four held 48 of a server's 100 connections.
POOL_SIZES = {"worker": 10, "scheduler": 6, "other": 8}


class Runtime:
    #: True for the test kit's runtime (`shared.testing`): sends and outbox events are recorded.
    captures_sends = False

    def __init__(
        self,
        settings: Settings,
        *,
        broker: dramatiq.Broker | None = None,
        kind: str = "other",
    ) -> None:
        self.settings = settings
        self._broker = broker
        self.kind = kind

    @property
    def pool_size(self) -> int:
        return self.settings.db_pool_size or POOL_SIZES.get(self.kind, POOL_SIZES["other"])

    @cached_property
    def broker(self) -> dramatiq.Broker:
        if self._broker is not None:
            return self._broker
        from .broker import build_broker

        return build_broker(self.settings, middleware=[])

    @cached_property
    def queue_servers(self) -> QueueServers:
        """The Redis server of each queue (REDIS_QUEUE_URLS); the broker's client for its own."""
        from .queue_servers import QueueServers

        server = getattr(self.broker, "server", None)  # a worker's broker: its queues' server
        client = getattr(self.broker, "client", None)
        return QueueServers(self.settings, reuse={server: client} if server and client else None)

    def broker_for(self, queue: str) -> dramatiq.Broker:
        """A broker that enqueues on the Redis carrying `queue` (a replay's plain enqueue,
        which claims no job id): the process's own when `queue` is on its server."""
        from .queue_servers import server_of

        server = server_of(self.settings, queue)
        if server == getattr(self.broker, "server", None):
            return self.broker
        with _lock:
            brokers = self.__dict__.setdefault("_queue_brokers", {})
            if server not in brokers:
                from .broker import FleetRedisBroker

                brokers[server] = FleetRedisBroker(
                    client=self.queue_servers.client(queue),
                    namespace=self.settings.broker_namespace,
                    heartbeat_timeout=self.settings.heartbeat_timeout_ms,
                    middleware=[],
                )
                brokers[server].server = server
            found: dramatiq.Broker = brokers[server]
            return found

    @cached_property
    def pool(self) -> ConnectionPool:
        """Producer connections. QUEUED rows are written with synchronous_commit=off: the
        message itself is in Redis, and the worker re-creates a lost row when it starts."""
        from psycopg_pool import ConnectionPool

        from .db.connect import connect_kwargs, pooled

        # Behind a transaction-mode pooler no startup `options` (PgBouncer refuses them): the
        # pool's own writes then commit synchronously; QUEUED rows go through the writer's
        # fast lane, which sets synchronous_commit=off per transaction.
        options = {} if pooled(self.settings) else {"options": "-c synchronous_commit=off"}
        return ConnectionPool(
            self.settings.database_dsn,
            min_size=1,
            max_size=self.pool_size,
            kwargs={**options, **connect_kwargs(self.settings)},
            name="jobfleet-producer",
            open=True,
            timeout=3.0,
        )

    @cached_property
    def engine(self) -> Engine:
        from .db.connect import connect_kwargs
        from .db.engine import make_engine

        return make_engine(self.settings.database_url, connect_args=connect_kwargs(self.settings))

    @cached_property
    def sessions(self) -> sessionmaker[Session]:
        from .db.engine import make_sessionmaker

        return make_sessionmaker(self.engine)

    @cached_property
    def writer(self) -> RunWriter:
        """Group-commit writer of this process's QUEUED rows."""
        from .db.connect import run_writer

        return run_writer(self.settings, name="jobfleet-queued-writer", on_fresh=self._mark_fresh)

    def _mark_fresh(self, runs: list[tuple[str, str, str, str]]) -> None:
        """Runs whose QUEUED rows were inserted new (job id, message id, queue, the row's day):
        their job ids' keys say so, on their queues' servers (`broker/starts.py`)."""
        by_queue: dict[str, list[tuple[str, str, str]]] = {}
        for job_id, message_id, queue, day in runs:
            by_queue.setdefault(queue, []).append((job_id, message_id, day))
        for client, queues in self.queue_servers.by_server(by_queue):
            self.run_starts.mark_fresh(client, [run for q in queues for run in by_queue[q]])

    @cached_property
    def run_starts(self) -> RunStarts:
        """The job id keys' start records (`broker/starts.py`)."""
        from .broker.starts import RunStarts

        return RunStarts(self.settings.broker_namespace)

    @cached_property
    def sender(self) -> Sender:
        from .broker import EnqueueGate
        from .jobs.send import Sender

        gate = EnqueueGate(
            self.broker, window_ms=self.settings.dedup_window_ms, servers=self.queue_servers
        )
        return Sender(gate, self.writer, self.pool)

    def settle(self, timeout: float = 5) -> bool:
        """Wait until the QUEUED rows of this process's sends so far are written (they are
        written just after `send` returns), so that a read right after a send sees its run."""
        if "writer" not in self.__dict__:
            return True
        return self.writer.flush(timeout)

    def close(self) -> None:
        if "writer" in self.__dict__:
            self.writer.flush(5)
            self.writer.close()
        if "pool" in self.__dict__:
            self.pool.close()
        if "engine" in self.__dict__:
            self.engine.dispose()
        if "queue_servers" in self.__dict__:
            self.queue_servers.close()


_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        with _lock:
            if _runtime is None:
                _runtime = Runtime(get_settings())
    return _runtime


def installed_runtime() -> Runtime | None:
    """The runtime installed so far, without building one."""
    return _runtime


def set_runtime(runtime: Runtime | None) -> Runtime | None:
    """Install `runtime` (None: the next `get_runtime` builds one); returns the previous one."""
    global _runtime
    with _lock:
        previous, _runtime = _runtime, runtime
    return previous
