"""The Celery worker of the benchmark: `celery -A bench.apps.celery_app worker --pool prefork`.

Celery 5 (the optional `bench` extra) on the same Redis, under this run's own key prefix
(`<namespace>:celery:`, so the run's clean-up removes it), with no result backend and early
acknowledgements (Celery's default: a message is acknowledged when a worker process takes it,
before the body runs; `task_acks_late` off), the same no-op body as bare Dramatiq and jobfleet
(`bench/jobs.py`: one Redis command per job). Redis URL and namespace come from the environment
the benchmark sets; producers import the same app (`bench/systems.py`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready

from bench.jobs import Keys, record

QUEUE = "bench-celery"


def make_app(redis_url: str, namespace: str) -> tuple[Celery, Any]:
    """The app and its no-op task, for this run's Redis and namespace."""
    app = Celery("jobfleet_bench", broker=redis_url, set_as_current=False)
    app.conf.update(
        broker_transport_options={"global_keyprefix": f"{namespace}:celery:"},
        broker_connection_retry_on_startup=True,
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=False,  # early acks, as measured in issue 24 (Celery's default)
        task_default_queue=QUEUE,
        task_serializer="json",
        accept_content=["json"],
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
    )
    keys = Keys(namespace, "celery")
    client = redis.Redis.from_url(redis_url)

    @app.task(name="bench_noop")  # type: ignore[untyped-decorator]
    def bench_noop(sent_at: float, tag: str, total: int) -> None:
        record(client, keys, tag, sent_at, total)

    return app, bench_noop


@worker_ready.connect  # type: ignore[untyped-decorator]
def _say_ready(**_: Any) -> None:
    """What the benchmark's launcher waits for (the worker logs at WARNING: a line per task at
    INFO would cost Celery more than the task itself)."""
    print("celery worker ready for action", file=sys.stderr, flush=True)


if "BROKER_NAMESPACE" in os.environ:  # imported by the `celery` CLI in a worker
    app, noop = make_app(os.environ["REDIS_URL"], os.environ["BROKER_NAMESPACE"])
