"""What the shared machine was doing while a system was measured, and how fast its parts are.

On a 2-core machine shared with other sessions, jobfleet's drain rate follows the latency of
a durable Postgres commit (a worker acknowledges a job only after its COMPLETED row is
flushed), which other sessions' load can raise from under a millisecond to tens of
milliseconds. Its enqueue rate follows something else: each send costs the producer more
Python than a bare Dramatiq send, Redis a larger script, and Postgres ~45-60 µs of CPU to
insert the QUEUED row (fourteen indexes of `job_runs`), on whichever core is free. With a
spare core that Postgres work runs beside the producer and hides; without one (another
session's load, a slower core) it adds to every send, and the ratio falls. So each probe
records, with the load average:

- `pg_commit_ms`: a durable commit (a WAL record flushed, `synchronous_commit=on`);
- `pg_async_commit_ms`: the same without the flush (the fast lane's commit mode: QUEUED rows);
- `redis_rtt_us`: a PING's round trip (every send is one);
- `python_us`: a fixed piece of pure Python (dicts, strings, a call: a send's kind of work),
  per 1,000 calls: the core's speed for the producer, and what other load leaves of it;
- `spare_cores`: the CPU the machine left idle during the probe (CPUs x idle fraction).

`send_cpu` (used by `phases.enqueue`) measures the CPU per send by process group: the
producer, this run's Postgres backends, Postgres's own background processes (WAL writer,
checkpointer), Redis, and everything else (other sessions).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

from .proc_cpu import CpuMeter, _machine_busy_s

#: A transactional WAL record: its commit must be flushed (fsynced) like a job's outcome.
EMIT = "SELECT pg_logical_emit_message(true, 'jobfleet-bench', 'probe')"


def commit_latency_ms(dsn: str, commits: int = 30, durable: bool = True) -> float | None:
    """Median wall time of a commit that wrote WAL (`durable`: flushed before it returns, as
    a job's outcome; else as a QUEUED row); None if it cannot be measured."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"SET synchronous_commit TO {'on' if durable else 'off'}")
            samples = []
            for _ in range(commits):
                started = time.perf_counter()
                conn.execute(EMIT)
                samples.append((time.perf_counter() - started) * 1000)
    except psycopg.Error:
        return None
    return statistics.median(samples)


def redis_rtt_us(client: redis.Redis, pings: int = 200) -> float | None:
    """Median wall time of a PING, µs; None if Redis does not answer."""
    try:
        samples = []
        for _ in range(pings):
            started = time.perf_counter()
            client.ping()
            samples.append((time.perf_counter() - started) * 1e6)
    except redis.RedisError:
        return None
    return statistics.median(samples)


def _unit(i: int) -> str:
    row = {"j": f"org:bench:noop:{i}", "n": i, "tag": "drain"}
    return f"{row['j']}:{len(row)}:{row.get('tag')}"


def python_us(calls: int = 20_000, rounds: int = 5) -> float:
    """Median wall µs per 1,000 calls of a small pure-Python function (wall, not CPU: what
    other load leaves of a core shows, as it does in the enqueue rate)."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for i in range(calls):
            _unit(i)
        samples.append((time.perf_counter() - started) / calls * 1e6 * 1000)
    return statistics.median(samples)


def snapshot(dsn: str, client: redis.Redis | None = None) -> dict[str, Any]:
    busy0, total0 = _machine_busy_s()
    out: dict[str, Any] = {
        "loadavg_1m": os.getloadavg()[0],
        "pg_commit_ms": commit_latency_ms(dsn),
        "pg_async_commit_ms": commit_latency_ms(dsn, durable=False),
        "redis_rtt_us": redis_rtt_us(client) if client is not None else None,
        "python_us": python_us(),
    }
    busy1, total1 = _machine_busy_s()
    idle = 1 - (busy1 - busy0) / max(total1 - total0, 1e-9)
    out["spare_cores"] = round((os.cpu_count() or 1) * max(idle, 0.0), 2)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


#: Postgres's background processes: their WAL work is whoever wrote's, this run's included.
_PG_BACKGROUND = ("walwriter", "checkpointer", "background writer", "autovacuum")


def send_cpu(database: str) -> CpuMeter:
    """A meter of CPU per send by group (`start()`, the sends, `stop(n)`: ms per send)."""

    def run_backend(pid: int, comm: str, chain: list[int]) -> bool:
        return comm == "postgres" and f" {database} " in _cmdline(pid)

    def pg_background(pid: int, comm: str, chain: list[int]) -> bool:
        return comm == "postgres" and any(name in _cmdline(pid) for name in _PG_BACKGROUND)

    return CpuMeter({"postgres_run": run_backend, "postgres_background": pg_background})
