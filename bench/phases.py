"""The measurements, each a plain function of a system (see `systems.py`).

- `enqueue`: N sends from one thread, no worker running: jobs/s (after a first send, timed
  apart: the producer's start-up).
- `drain`: the N queued jobs run by the worker group: jobs/s from the first completion to the
  last, and over the steady middle (10 % → 90 % of the jobs), which leaves out the start-up
  skew of the worker processes and the tail.
- `latency`: sends paced at a fixed rate to running workers: send-to-start percentiles.
- `wakeup`: one job after the workers sat idle, repeated: median send-to-start.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

from . import machine
from .stats import percentile, summary_ms
from .systems import Bare, DrainTimeout, Fleet, System, llen


def enqueue(system: System, n: int, database: str | None = None) -> dict[str, Any]:
    """jobs/s until every send returned and, for jobfleet, its QUEUED rows (written in the
    background by the producer's group-commit writer) are in Postgres: work deferred past the
    loop still counts. `calls_per_s` is the rate of the send calls alone. With `database`
    (this run's), `cpu_us` is the CPU per send of each group of processes (`machine.send_cpu`:
    the producer, this run's Postgres backends, Postgres's background processes, Redis, the
    rest) and `machine_busy` the fraction of all cores busy meanwhile."""
    # Each system's first send pays its process's start-up once (jobfleet: the broker and
    # Postgres pools, the migration check, the QUEUED writer's connection: 70-270 ms here;
    # bare Dramatiq: its Lua script, 5-17 ms): 15-50 % of a 2,000-send clock (`--quick`),
    # which measured start-up, not sends (0.48x quick where 20,000 sends gave 0.73x). It
    # goes before the clock and is recorded apart (`first_send_ms`); its job is a "lat" one,
    # which the drain does not count and the latency phase clears.
    first = time.perf_counter()
    system.send("lat")
    system.flush()
    first_send_ms = (time.perf_counter() - first) * 1000
    meter = machine.send_cpu(database) if database is not None else None
    if meter is not None:
        meter.start()
    started = time.perf_counter()
    for _ in range(n):
        system.send("drain", n)
    calls = time.perf_counter() - started
    system.flush()
    seconds = time.perf_counter() - started
    result: dict[str, Any] = {
        "jobs": n,
        "seconds": seconds,
        "per_s": n / seconds,
        "calls_per_s": n / calls,
        "first_send_ms": first_send_ms,
    }
    if meter is not None:
        used = meter.stop(n)
        result["machine_busy"] = used.pop("machine_busy")
        result["cpu_us"] = {group: round(ms * 1000, 1) for group, ms in used.items()}
    if isinstance(system, Fleet) and system.duplicates:
        raise RuntimeError(f"fleet: {system.duplicates} sends were answered as duplicates")
    return result


def drain(system: System, n: int, timeout: float | None = None) -> dict[str, Any]:
    timeout = timeout or 60 + n / 100
    stamps = system.wait_drained(n, timeout)
    missing = {"first", "p10", "p90", "last"} - stamps.keys()
    if missing:
        raise DrainTimeout(f"{system.name}: drain stamps missing: {sorted(missing)}")
    whole = stamps["last"] - stamps["first"]
    steady = stamps["p90"] - stamps["p10"]
    steady_jobs = math.ceil(0.9 * n) - math.ceil(0.1 * n)
    return {
        "jobs": n,
        "seconds": whole,
        "per_s": (n - 1) / whole if whole > 0 else None,
        "steady_per_s": steady_jobs / steady if steady > 0 else None,
    }


def latency(system: System, count: int, rate: float, timeout: float = 60) -> dict[str, Any]:
    """Send `count` jobs at `rate`/s on a fixed schedule (no catch-up bursts are needed at
    these rates; a late send is simply late), then collect what the handlers recorded."""
    key = system.keys.samples("lat")
    system.redis.delete(key)
    interval = 1.0 / rate
    t0 = time.perf_counter()
    lag = 0.0
    for i in range(count):
        delay = t0 + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        else:
            lag = max(lag, -delay)
        system.send("lat")
    deadline = time.monotonic() + timeout
    while llen(system.redis, key) < count:
        if time.monotonic() > deadline:
            raise DrainTimeout(f"{system.name}: {llen(system.redis, key)}/{count} latency samples")
        time.sleep(0.05)
    samples = [float(v) for v in system.redis.lrange(key, 0, -1)]
    system.redis.delete(key)
    return {"rate_per_s": rate, "max_send_lag_ms": lag * 1000, **summary_ms(samples)}


def wakeup(system: System, samples: int, idle_s: float, rng: random.Random) -> dict[str, Any]:
    """Let the workers idle (their poll back-off grows to its cap), send one job, time it.
    A small random extra idle keeps the send out of step with the consumers' poll cycle."""
    key = system.keys.samples("wake")
    system.redis.delete(key)
    values: list[float] = []
    for _ in range(samples):
        time.sleep(idle_s + rng.uniform(0, 0.25))
        system.send("wake")
        popped = system.redis.blpop([key], timeout=30)
        if popped is None:
            raise DrainTimeout(f"{system.name}: idle wake-up job not started within 30 s")
        values.append(float(popped[1]))
    return {
        "n": len(values),
        "median_ms": percentile(values, 0.5) * 1000,
        "p90_ms": percentile(values, 0.9) * 1000,
        "max_ms": max(values) * 1000,
    }


__all__ = ["Bare", "Fleet", "drain", "enqueue", "latency", "wakeup"]
