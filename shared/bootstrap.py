"""Composition roots: what a worker process or a producer process builds when it starts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dramatiq
from dramatiq.middleware import TimeLimit

from .broker import FleetRedisBroker, build_broker, consumers_check, nodes
from .config import Settings, get_settings
from .db.connect import run_writer
from .db.watch import RunStoreWatch
from .jobs import catalog
from .jobs.run_writer import RunWriter
from .middleware.heartbeat import Heartbeat
from .middleware.log_context import LogContext
from .middleware.metrics import Metrics
from .middleware.process_services import ProcessServices
from .middleware.tracking import Tracking
from .observability import probes
from .observability.health import HealthServer
from .observability.logging import configure_logging
from .observability.metrics import ScrapeCollector
from .pauses import PauseWatch
from .queue_servers import QueueServers
from .runtime import Runtime, set_runtime


def health_server(
    settings: Settings,
    service: str,
    client: Any,
    queues: list[str],
    checks: dict[str, Callable[[], None]] | None = None,
    servers: QueueServers | None = None,
) -> HealthServer | None:
    """`client`: the process's Redis (readiness); `servers`: where each queue's depth is read
    (default: a client of each server REDIS_URL and REDIS_QUEUE_URLS name)."""
    if not settings.health_port:
        return None
    on = servers or QueueServers(settings)

    def sample() -> dict[str, dict[Any, float]]:
        return {
            "depth": probes.queue_depths(on, settings, queues),
            "outbox": {"pending": probes.outbox_pending(settings)},
            "paused": probes.queues_paused(on, settings, queues),
        }

    return HealthServer(
        host=settings.health_host,
        port=settings.health_port,
        service=service,
        checks={
            "redis": probes.redis_check(client),
            "postgres": probes.postgres_check(settings.database_dsn),
            **(checks or {}),
        },
        metrics_token=settings.metrics_token,
        collector=ScrapeCollector(sample),
    )


def boot_worker(
    domain: str, *, settings: Settings | None = None, queues: Sequence[str] | None = None
) -> FleetRedisBroker:
    """Build the broker of a worker process, install it globally and return it.

    Called by a domain's `app` module, the one Dramatiq's CLI imports to find the broker and
    the actors (`dramatiq <domain package>.app`); nothing connects until the worker boots.
    `queues`: what it consumes (default: the queues of the domain's registered jobs), which
    must share one Redis server (REDIS_QUEUE_URLS): its broker talks to that one.
    """
    settings = settings or get_settings()
    service = f"worker-{domain}"
    configure_logging(level=settings.log_level, fmt=settings.log_format, process=service)
    broker = worker_broker(
        settings, service, queues=domain_queues(domain) if queues is None else queues
    )
    dramatiq.set_broker(broker)
    set_runtime(Runtime(settings, broker=broker, kind="worker"))
    return broker


def _ready(broker: FleetRedisBroker) -> None:
    """Before the consumers start: probe the run store once. Its first probe checks the schema
    (importing the migration scripts' reader, ~1 s of CPU); left to the first fetch, it held
    up every consumer of a process that already said "ready for action" (the first second of
    a drain). A store that is down now is probed again by the consumers, as always."""
    if broker.store_watch is not None:
        broker.store_watch.usable()


def _stop(broker: FleetRedisBroker, writer: RunWriter, tracking: Tracking) -> None:
    """Hand back the runs whose handler did not end within the grace, acknowledge what is
    being made durable, then close the run writer."""
    tracking.hand_back(broker)
    broker.acker.drain()
    writer.close()


def domain_queues(domain: str) -> list[str]:
    """The queues of the jobs `domain` registers (none for a domain that is not registered);
    a dash and an underscore are the same (`my-domain` is `my_domain`)."""
    from .domains import load_target, registered

    return list(
        dict.fromkeys(
            spec.queue
            for d in registered()
            if d.name.replace("_", "-") == domain.replace("_", "-") and d.jobs
            for spec in load_target(d.jobs)
        )
    )


def worker_broker(
    settings: Settings, service: str, *, queues: Sequence[str] = ()
) -> FleetRedisBroker:
    """A broker with the fleet's worker middleware (tracking, retries, heartbeat, metrics), on
    the Redis server of `queues` (REDIS_QUEUE_URLS; default REDIS_URL)."""
    writer = run_writer(
        settings,
        finish_linger_ms=settings.tracking_finish_linger_ms,
        start_linger_ms=settings.tracking_start_linger_ms,
    )
    broker = build_broker(settings, queues=queues)
    broker.store_watch = RunStoreWatch(
        probes.postgres_check(settings.database_dsn), lambda: writer.failed_at
    )
    broker.pause_watch = PauseWatch.of(broker.client, settings.broker_namespace)
    services = ProcessServices(
        service=service,
        make_server=lambda: health_server(
            settings,
            service,
            broker.client,
            sorted(catalog.QUEUES),
            {"consumers": consumers_check(broker)},
            QueueServers(settings, reuse={broker.server: broker.client} if broker.server else None),
        ),
        on_stop=lambda: _stop(broker, writer, tracking),
        on_boot=lambda: _ready(broker),
    )
    tracking = Tracking(settings, writer)
    for middleware in (
        LogContext(),
        Metrics(),
        TimeLimit(time_limit=settings.default_time_limit_ms),
        tracking,
        Heartbeat(
            interval_ms=settings.heartbeat_interval_ms,
            nodes=nodes.recorder(service, lambda: writer.owner),
        ),
        services,
    ):
        broker.add_middleware(middleware)
    return broker
