"""Per-minute rollups of finished runs: what the console's charts read (issue 32).

`roll_up` (the scheduler's `run-stats` job, every `INTERVAL_S`) aggregates the runs that
finished in whole minutes since the watermark into `run_stats` (runs per minute, queue and
final status) and `run_latency` (per minute, queue and kind, a logarithmic histogram of
send->start, `wait`, and started->finished, `run`), each at two widths (`SPANS`: 1 and 15
minutes), then moves the watermark. A minute is
rolled up once it ended `MARGIN` ago (an outcome is committed within milliseconds of its
`finished_at`); at most `CHUNK` at a time, each in its own transaction under the watermark's
row lock, so two scheduler replicas never roll a minute up twice. Rollups older than
`RETENTION` are deleted. It reads the minutes through `ix_job_runs_finished_at_job`; the run's
own write path is untouched.

`wait` counts only runs on their first attempt and never replayed: their `queued_at` is when
they were sent (a retried or replayed run keeps its first `queued_at`). Runs waiting for a retry
(FAILED) have no `finished_at` and are not counted until they end.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import structlog

from .runtime import Runtime

log = structlog.get_logger("jobfleet.run_stats")

INTERVAL_S = 30.0
MARGIN = timedelta(minutes=1)
CHUNK = timedelta(hours=1)
#: The first rollup starts this far back.
FIRST = timedelta(days=1)
RETENTION = timedelta(days=2)
#: Histogram buckets per doubling of milliseconds (bucket b: [2^(b/3), 2^((b+1)/3)) ms).
PER_DOUBLING = 3
FINAL = ("COMPLETED", "DEAD", "CANCELED")
#: The widths rolled up, in minutes: the hour's chart reads the 1-minute rows, the day's the
#: 15-minute ones.
SPANS = (1, 15)


def bucket_sql(ms: str) -> str:
    """The histogram bucket of a duration in milliseconds (SQL)."""
    return f"floor({PER_DOUBLING} * ln(GREATEST(1.0, {ms})) / ln(2.0))::smallint"


def bucket_ms(bucket: int) -> float:
    """A bucket's middle (geometric), in milliseconds."""
    return float(2 ** ((bucket + 0.5) / PER_DOUBLING))


def percentiles(hist: dict[int, int], qs: tuple[float, ...] = (0.5, 0.95, 0.99)) -> list[float]:
    """Each quantile of a histogram {bucket: runs}, in milliseconds (empty: [])."""
    total = sum(hist.values())
    if not total:
        return []
    out, seen, buckets = [], 0, sorted(hist)
    wanted = [math.ceil(q * total) for q in qs]
    i = 0
    for b in buckets:
        seen += hist[b]
        while i < len(wanted) and seen >= wanted[i]:
            out.append(bucket_ms(b))
            i += 1
    return out


#: What one rollup chunk (or a chart's live tail) reads: each finished run's minute bin, queue,
#: status and buckets. `%(a)s`/`%(b)s`: the range of `finished_at`; `%(bin)s`: the bin width.
FINISHED = f"""
SELECT date_bin(%(bin)s::interval, finished_at, TIMESTAMPTZ '2000-01-01') AS at, queue, status,
       CASE WHEN started_at IS NOT NULL
            THEN {bucket_sql("1000 * extract(epoch FROM finished_at - started_at)")} END AS run_b,
       CASE WHEN attempt <= 1 AND replay_count = 0 AND started_at IS NOT NULL
            THEN {bucket_sql("1000 * extract(epoch FROM started_at - queued_at)")} END AS wait_b
  FROM job_runs
 WHERE finished_at >= %(a)s AND finished_at < %(b)s AND status IN ('COMPLETED', 'DEAD', 'CANCELED')
"""
COUNTS = f"SELECT at, queue, status, count(*) FROM ({FINISHED}) AS f GROUP BY 1, 2, 3"
LATENCY = f"""
SELECT at, queue, kind, bucket, count(*) FROM ({FINISHED}) AS f,
       LATERAL (VALUES ('run', run_b), ('wait', wait_b)) AS k(kind, bucket)
 WHERE bucket IS NOT NULL
 GROUP BY 1, 2, 3, 4
"""


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def roll_up(runtime: Runtime, *, now: datetime, chunks: int = 48) -> int:
    """Roll up the whole minutes finished since the watermark (at most `chunks` x `CHUNK`);
    returns how many (span, minute, queue, status) rows were written or added to."""
    written = 0
    for _ in range(chunks):
        with runtime.pool.connection() as conn:
            conn.execute(
                "INSERT INTO run_stats_watermark (upto) VALUES (%s) ON CONFLICT DO NOTHING",
                (_minute(now - FIRST),),
            )
            row = conn.execute("SELECT upto FROM run_stats_watermark FOR UPDATE").fetchone()
            assert row is not None
            start: datetime = row[0]
            end = min(start + CHUNK, _minute(now - MARGIN))
            if end <= start:
                break
            for width in SPANS:
                rows = {"a": start, "b": end, "bin": f"{width} minutes", "span": width}
                # A minute is rolled up once (the watermark); a span of several minutes may be
                # in two chunks: added to.
                written += conn.execute(
                    f"INSERT INTO run_stats (span, minute, queue, status, runs)"
                    f" SELECT %(span)s, * FROM ({COUNTS}) AS c"
                    " ON CONFLICT (span, minute, queue, status)"
                    " DO UPDATE SET runs = run_stats.runs + EXCLUDED.runs",
                    rows,
                ).rowcount
                conn.execute(
                    f"INSERT INTO run_latency (span, minute, queue, kind, bucket, runs)"
                    f" SELECT %(span)s, * FROM ({LATENCY}) AS l"
                    " ON CONFLICT (span, minute, queue, kind, bucket)"
                    " DO UPDATE SET runs = run_latency.runs + EXCLUDED.runs",
                    rows,
                )
            conn.execute("UPDATE run_stats_watermark SET upto = %s", (end,))
    with runtime.pool.connection() as conn:
        for table in ("run_stats", "run_latency"):
            conn.execute(f"DELETE FROM {table} WHERE minute < %s", (now - RETENTION,))
    if written:
        log.info("run_stats.rolled_up", rows=written)
    return written


def watermark(conn: Any) -> datetime | None:
    row = conn.execute("SELECT upto FROM run_stats_watermark").fetchone()
    return None if row is None else row[0]
