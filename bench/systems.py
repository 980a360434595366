"""The systems under test, seen from the producer: how to send a no-op job and how to tell
when (and how fast) N of them were drained.

- `Bare`: a stock `RedisBroker` (Dramatiq's default middleware) and `actor.send(...)`; a job is
  done when its body ran (Dramatiq acknowledges right after).
- `Fleet`: `JobSpec.send(...)` through the runtime (validation, stable id, dedup, QUEUED row);
  a job is done when its run is COMPLETED in `job_runs` (the worker acknowledges only after
  that row is durable).
- `CelerySystem`: Celery 5 on the same Redis (`bench/apps/celery_app.py`: no result backend,
  early acks), `task.delay(...)`; a job is done when its body ran. Only when the optional
  `bench` extra is installed (`celery_version()` is None otherwise).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import dramatiq
import psycopg
import redis
from dramatiq.brokers.redis import RedisBroker

from shared.runtime import Runtime, set_runtime

from .jobs import BENCH_ORG, NOOP, Keys, declare_bare
from .sandbox import Sandbox

POLL_S = 0.1


class DrainTimeout(RuntimeError):
    pass


class Bare:
    name = "bare"
    app = "bench.apps.bare"

    def __init__(self, sandbox: Sandbox) -> None:
        self.keys = Keys(sandbox.namespace, "bare")
        self.broker = RedisBroker(url=sandbox.base.redis_url, namespace=sandbox.namespace)  # type: ignore[no-untyped-call]
        self.actor = declare_bare(self.broker, sandbox.namespace)
        self.redis = sandbox.redis()

    @property
    def middleware(self) -> list[str]:
        return [type(m).__name__ for m in self.broker.middleware]

    def send(self, tag: str, total: int = 0) -> None:
        self.actor.send(time.time(), tag, total)

    def flush(self) -> None:
        """Nothing is deferred: a send returns once Redis holds the message."""

    def wait_drained(self, n: int, timeout: float) -> dict[str, float]:
        deadline = time.monotonic() + timeout
        while int(self.redis.get(self.keys.count) or 0) < n:
            if time.monotonic() > deadline:
                done = int(self.redis.get(self.keys.count) or 0)
                raise DrainTimeout(f"{self.name}: {done}/{n} jobs done after {timeout:.0f} s")
            time.sleep(POLL_S)
        stamps = {str(k): float(v) for k, v in self.redis.hgetall(self.keys.stamps).items()}
        return stamps

    def close(self) -> None:
        self.broker.close()
        self.redis.close()


WINDOW = """
SELECT extract(epoch FROM min(finished_at)),
       extract(epoch FROM percentile_disc(0.1) WITHIN GROUP (ORDER BY finished_at)),
       extract(epoch FROM percentile_disc(0.9) WITHIN GROUP (ORDER BY finished_at)),
       extract(epoch FROM max(finished_at))
  FROM job_runs
 WHERE job_name = %s AND payload->>'tag' = 'drain' AND status = 'COMPLETED'
"""
#: Only polled once every handler ran (the Redis counter says so): a scan of job_runs ten
#: times a second would take CPU from the workers being measured.
#: The drain's jobs only: the enqueue's first send (a "lat" job, `phases.enqueue`) runs too.
COUNTS = """
SELECT status, count(*) FROM job_runs
 WHERE job_name = %s AND payload->>'tag' = 'drain'
 GROUP BY status
"""


class Fleet:
    name = "fleet"
    app = "bench.apps.fleet"

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.keys = Keys(sandbox.namespace, "fleet")
        self.runtime = Runtime(sandbox.settings)
        self._previous = set_runtime(self.runtime)
        self.duplicates = 0
        self.redis = sandbox.redis()

    def send(self, tag: str, total: int = 0) -> None:
        result = NOOP.send(
            {
                "org_id": BENCH_ORG,
                "entity_id": uuid.uuid4(),
                "sent_at": time.time(),
                "tag": tag,
                "total": total,
            }
        )
        if result.duplicate:
            self.duplicates += 1

    def flush(self, timeout: float = 60) -> None:
        """Wait for the QUEUED rows the producer writes in the background (when it does)."""
        flush = getattr(self.runtime.sender, "flush", None)
        if flush is not None and flush(timeout) is False:
            raise DrainTimeout(f"fleet: QUEUED rows not written within {timeout:.0f} s")

    def wait_drained(self, n: int, timeout: float) -> dict[str, float]:
        deadline = time.monotonic() + timeout
        while int(self.redis.get(self.keys.count) or 0) < n and time.monotonic() < deadline:
            time.sleep(POLL_S)
        with psycopg.connect(self.sandbox.dsn, autocommit=True) as conn:
            while True:
                counts: dict[str, int] = dict(conn.execute(COUNTS, (NOOP.name,)).fetchall())
                if counts.get("COMPLETED", 0) >= n:
                    break
                bad = {s: c for s, c in counts.items() if s in ("FAILED", "DEAD", "CANCELED")}
                if bad:
                    raise DrainTimeout(f"fleet: runs did not complete: {bad}")
                if time.monotonic() > deadline:
                    raise DrainTimeout(f"fleet: {counts} of {n} after {timeout:.0f} s")
                time.sleep(POLL_S)
            row: Any = conn.execute(WINDOW, (NOOP.name,)).fetchone()
        first, p10, p90, last = (float(v) for v in row)
        return {"first": first, "p10": p10, "p90": p90, "last": last}

    def close(self) -> None:
        set_runtime(self._previous)
        self.runtime.close()
        broker = self.runtime.__dict__.get("broker")
        if isinstance(broker, dramatiq.Broker):
            broker.close()
        self.redis.close()


def celery_version() -> str | None:
    """The installed Celery's version, None when the `bench` extra is not installed."""
    try:
        import celery
    except ImportError:
        return None
    return str(celery.__version__)


class CelerySystem(Bare):
    """Sends and counts like `Bare` (the same body stamps the same Redis counter)."""

    name = "celery"
    app = "bench.apps.celery_app"

    def __init__(self, sandbox: Sandbox) -> None:  # no Dramatiq broker: not Bare.__init__
        from .apps.celery_app import make_app

        self.keys = Keys(sandbox.namespace, "celery")
        self.celery, self.task = make_app(sandbox.base.redis_url, sandbox.namespace)
        self.redis = sandbox.redis()

    @property
    def middleware(self) -> list[str]:
        return []

    def send(self, tag: str, total: int = 0) -> None:
        self.task.delay(time.time(), tag, total)

    def close(self) -> None:
        self.celery.close()
        self.redis.close()


System = Bare | Fleet


def make(name: str, sandbox: Sandbox) -> System:
    if name == "celery":
        return CelerySystem(sandbox)
    return Bare(sandbox) if name == "bare" else Fleet(sandbox)


def llen(client: redis.Redis, key: str) -> int:
    return int(client.llen(key))
