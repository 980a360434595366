"""The scheduler process: runtime, logging, health server, APScheduler, clean shutdown.

SIGTERM/SIGINT: no new runs start, running ones finish (`shutdown(wait=True)`), exit 0.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import structlog
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from prometheus_client import Counter, Histogram

from shared.broker import redis_client
from shared.config import Settings, get_settings
from shared.observability import probes
from shared.observability.health import HealthServer
from shared.observability.logging import configure_logging
from shared.observability.metrics import UP
from shared.runtime import Runtime, set_runtime

from .schedule import SCHEDULE, Periodic

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


def run_periodic(job: Periodic, runtime: Runtime, clock: Clock) -> None:
    """Read the clock once, run the job, count the outcome; never let an error kill the pool."""
    started = time.perf_counter()
    try:
        job.run(runtime, clock())
        RUNS.labels(job.name, "ok").inc()
    except Exception as exc:
        RUNS.labels(job.name, "error").inc()
        log.exception("scheduler.job_failed", job=job.name, error=str(exc))
    finally:
        RUN_SECONDS.labels(job.name).observe(time.perf_counter() - started)


def build_scheduler(
    runtime: Runtime, schedule: Sequence[Periodic] = SCHEDULE, *, clock: Clock = utcnow
) -> BackgroundScheduler:
    settings = runtime.settings
    scheduler = BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(max_workers=settings.scheduler_threads)},
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 30},
        timezone=UTC,
    )
    for job in schedule:
        scheduler.add_job(
            run_periodic,
            trigger=IntervalTrigger(seconds=job.interval_s(settings), timezone=UTC),
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

    client = redis_client(settings.redis_url)
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

    runtime = Runtime(settings)
    set_runtime(runtime)
    scheduler = build_scheduler(runtime)
    server = health_server(settings, scheduler)
    scheduler.start()
    if server is not None:
        server.start()
    UP.labels(SERVICE).set(1)
    log.info("scheduler.started", jobs=[_describe(j) for j in scheduler.get_jobs()])
    while not stop.wait(0.5):
        pass
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
