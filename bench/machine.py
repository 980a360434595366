"""What the shared machine was doing while a system was measured.

On a 2-core machine shared with other sessions, jobfleet's drain rate follows the latency of
a durable Postgres commit (a worker acknowledges a job only after its COMPLETED row is
flushed), which other sessions' load can raise from under a millisecond to tens of
milliseconds. Each measurement records it, with the load average, so a low ratio can be told
apart from a busy disk.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import psycopg

#: A transactional WAL record: its commit must be flushed (fsynced) like a job's outcome.
EMIT = "SELECT pg_logical_emit_message(true, 'jobfleet-bench', 'probe')"


def commit_latency_ms(dsn: str, commits: int = 30) -> float | None:
    """Median wall time of a synchronous commit that wrote WAL; None if it cannot be measured."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit TO on")
            samples = []
            for _ in range(commits):
                started = time.perf_counter()
                conn.execute(EMIT)
                samples.append((time.perf_counter() - started) * 1000)
    except psycopg.Error:
        return None
    return statistics.median(samples)


def snapshot(dsn: str) -> dict[str, Any]:
    return {"loadavg_1m": os.getloadavg()[0], "pg_commit_ms": commit_latency_ms(dsn)}
