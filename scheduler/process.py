"""The scheduler process: runtime, logging, health server, APScheduler, clean shutdown.

SIGTERM/SIGINT: no new runs start, running ones finish (`shutdown(wait=True)`), exit 0.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from prometheus_client import Counter, Histogram

from shared import pauses, periodic, redis_conn
from shared.config import Settings, get_settings
from shared.errors import DependencyUnavailable
from shared.jobs import catalog
from shared.observability import probes
from shared.observability.health import HealthServer
from shared.observability.logging import configure_logging
from shared.observability.metrics import UP
from shared.outage import OutageLog
from shared.queue_servers import QueueServers, server_of
from shared.runtime import Runtime, set_runtime

from .schedule import SCHEDULE, Periodic
from .settings import scheduler_settings

SERVICE = "scheduler"
log = structlog.get_logger("jobfleet.scheduler")

RUNS = Counter(
    "jobfleet_scheduler_runs_total", "Periodic job runs by job and outcome", ["job", "outcome"]
)
RUN_SECONDS = Histogram(
    "jobfleet_scheduler_run_seconds",
    "Duration of periodic job runs",
    ["job"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


#: One run of a job at a time in this process: a periodic run finding one in progress (a
#: run-now) is skipped, as APScheduler's `max_instances=1` skips it; a run-now waits its turn.
_RUNNING: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
#: Per job: the outage of a dependency its runs meet (the EVM node down for the indexer and the
#: keeper): one line when it begins, one every `SCHEDULER_OUTAGE_LOG_EVERY_S`, one when it ends.
_OUTAGES: dict[str, OutageLog] = {}


def _outage(job: str) -> OutageLog:
    outage = _OUTAGES.get(job)
    if outage is None:
        outage = _OUTAGES.setdefault(
            job,
            OutageLog(
                log,
                down_event="scheduler.job_outage",
                up_event="scheduler.job_recovered",
                every_s=scheduler_settings().outage_log_every_s,
            ),
        )
    return outage


def run_periodic(
    job: Periodic, runtime: Runtime, clock: Clock, *, forced_by: str | None = None
) -> None:
    """Read the clock once, run the job, count the outcome; never let an error kill the pool.

    A job an operator paused (`fleet schedule pause`) is skipped, unless this run is one an
    operator asked for (`fleet schedule run-now`, `forced_by`). Each run is recorded for
    `fleet schedule list`."""
    lock = _RUNNING[job.name]
    if not lock.acquire(blocking=forced_by is not None):
        return
    try:
        _run(job, runtime, clock, forced_by)
    finally:
        lock.release()


def _run(job: Periodic, runtime: Runtime, clock: Clock, forced_by: str | None) -> None:
    settings = runtime.settings
    client = pauses.redis_client(runtime)  # the runtime's pooled client
    now = clock()
    started = time.perf_counter()
    outcome = "ok"
    detail: str | None = None
    try:
        if forced_by is None and job.name in periodic.paused_jobs(
            client, settings.broker_namespace
        ):
            outcome = "paused"
            return
        result = job.run(runtime, now)
        _outage(job.name).answered(job=job.name)
        # What the job says of its pass, e.g. the keeper's "paused" when the contract's own
        # `paused()` switch is on: shown beside the operator's pause by `fleet schedule list`.
        detail = getattr(result, "outcome", None)
    except DependencyUnavailable as exc:
        outcome, detail = "error", "outage"
        _outage(job.name).failed(job=job.name, error=str(exc))
    except Exception as exc:
        outcome = "error"
        log.exception("scheduler.job_failed", job=job.name, error=str(exc))
    finally:
        elapsed = time.perf_counter() - started
        RUNS.labels(job.name, outcome).inc()
        if outcome != "paused":
            RUN_SECONDS.labels(job.name).observe(elapsed)
        try:
            periodic.record_run(
                client,
                settings.broker_namespace,
                job.name,
                at=now,
                outcome=outcome,
                duration_ms=elapsed * 1000,
                next_at=now + timedelta(seconds=job.interval_s()),
                by=forced_by,
                detail=detail,
            )
        except Exception as exc:  # Redis down: the run itself is what matters
            log.warning("scheduler.run_not_recorded", job=job.name, error=str(exc)[:200])


def take_run_now_requests(
    runtime: Runtime, clock: Clock, schedule: Sequence[Periodic] = SCHEDULE
) -> list[threading.Thread]:
    """Start at once, each in its own thread, the runs operators asked for that this replica won
    (one replica per request); each waits for a run of the same job in progress here to end."""
    try:
        won = periodic.claim_run_now(
            pauses.redis_client(runtime), runtime.settings.broker_namespace
        )
    except Exception as exc:
        log.warning("scheduler.run_now_unreadable", error=str(exc)[:200])
        return []
    by_name = {job.name: job for job in schedule}
    threads = []
    for name, by in won:
        job = by_name.get(name)
        if job is None:
            log.warning("scheduler.run_now_unknown", job=name)
            continue
        log.info("scheduler.run_now", job=name, by=by)
        thread = threading.Thread(
            target=run_periodic,
            args=(job, runtime, clock),
            kwargs={"forced_by": by},
            name=f"run-now-{name}",
            daemon=True,
        )
        thread.start()
        threads.append(thread)
    return threads


def build_scheduler(
    runtime: Runtime, schedule: Sequence[Periodic] = SCHEDULE, *, clock: Clock = utcnow
) -> BackgroundScheduler:
    scheduler = BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(max_workers=scheduler_settings().threads)},
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 30},
        timezone=UTC,
    )
    for job in schedule:
        scheduler.add_job(
            run_periodic,
            trigger=IntervalTrigger(seconds=job.interval_s(), timezone=UTC),
            args=(job, runtime, clock),
            id=job.name,
            name=job.name,
            next_run_time=clock(),
            max_instances=1,
            coalesce=True,
        )
    return scheduler


def health_server(settings: Settings, scheduler: BackgroundScheduler) -> HealthServer | None:
    if not settings.health_port:
        return None

    def running() -> None:
        if not scheduler.running:
            raise RuntimeError("scheduler not running")

    client = redis_conn.client(settings)  # REDIS_URL, or the master REDIS_SENTINELS name
    servers = QueueServers(settings, reuse={server_of(settings, None): client})

    def backlog(queue: str) -> dict[str, Any] | None:
        # KEDA's metrics-api trigger of each worker reads this (compose/k8s): the scheduler
        # runs two replicas behind a Service, and knows every queue of the catalog and the
        # Redis that carries it (REDIS_QUEUE_URLS).
        if queue not in catalog.QUEUES:
            return None
        return probes.queue_backlog(servers.client(queue), settings.broker_namespace, queue)

    return HealthServer(
        host=settings.health_host,
        port=settings.health_port,
        service=SERVICE,
        checks={
            "redis": probes.redis_check(client),
            "postgres": probes.postgres_check(settings.database_dsn),
            "scheduler": running,
        },
        metrics_token=settings.metrics_token,
        backlog=backlog,
    )


def main(settings: Settings | None = None) -> int:
    settings = settings or get_settings()
    configure_logging(level=settings.log_level, fmt=settings.log_format, process=SERVICE)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one "Running job" line per second
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    runtime = Runtime(settings, kind="scheduler")
    set_runtime(runtime)
    scheduler = build_scheduler(runtime)
    server = health_server(settings, scheduler)
    scheduler.start()
    if server is not None:
        server.start()
    UP.labels(SERVICE).set(1)
    log.info("scheduler.started", jobs=[_describe(j) for j in scheduler.get_jobs()])
    while not stop.wait(0.5):
        take_run_now_requests(runtime, utcnow)
    log.info("scheduler.stopping")
    scheduler.shutdown(wait=True)
    UP.labels(SERVICE).set(0)
    if server is not None:
        server.stop()
    runtime.close()
    log.info("scheduler.stopped")
    return 0


def _describe(job: Any) -> dict[str, str]:
    return {"name": str(job.name), "trigger": str(job.trigger)}
