"""The run store at scale: the console's and the status API's main queries and the run writer's
statements on a large partitioned `job_runs` (docs/scaling.md), p50/p95 each.

    .venv/bin/python bench/capacity.py --store-rows 10000000     # ~25 min on 2 shared cores

In the run's own database (`Sandbox`): `--store-rows` runs seeded in SQL by the console
bench's generator (bench/console.py: 200 orgs of unequal sizes, 11 job names, 3 % DEAD, over
the last 30 days, each in its day's partition; secondary indexes built after the load; one
execution on the record for every 10th run), then VACUUM ANALYZE. Timed, `--store-samples`
times each after 5 warm-ups, one at a time on one connection pool:

- reads through the code that serves them (`shared/console/search.py`, `shared/api/queries.py`):
  the console's Runs page unfiltered and by each filter, its Dead-letters page and a run's page
  (with its executions); the status API's list for an org (and by entity) and a run's state;
- the run writer's statements (shared/jobs/run_writer.py) on batches of `--store-batch` runs,
  each batch one transaction (asynchronous commit: the statement, not the fsync): QUEUED rows
  of new job ids, their START, a PROGRESS, a lease RENEW, their FINISH.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from bench.console import generate
from bench.sandbox import Sandbox
from shared.api import queries
from shared.console import search
from shared.jobs import run_writer
from shared.runtime import Runtime


def _summary(times_ms: list[float]) -> dict[str, float]:
    """p50, p95 and max of the samples (in ms), to 0.01 ms."""
    times = sorted(times_ms)
    p95 = times[min(len(times) - 1, round(0.95 * len(times)) - 1)]
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(p95, 2),
        "max_ms": round(times[-1], 2),
    }


def _timed(fn: Callable[[], object], samples: int) -> dict[str, float]:
    for _ in range(5):
        fn()
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return _summary(times)


def _reads(rt: Runtime, dsn: str) -> dict[str, Callable[[], object]]:
    with psycopg.connect(dsn) as conn:
        big = conn.execute(
            "SELECT org_id FROM job_runs GROUP BY org_id ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()[0]  # type: ignore[index]
        one = conn.execute(
            "SELECT j.job_id, r.request_id, r.entity_id, r.entity_type, r.org_id"
            " FROM job_executions j JOIN job_runs r USING (job_id)"
            " WHERE r.request_id IS NOT NULL LIMIT 1"
        ).fetchone()
    assert one is not None, "no run with an execution and a request id"
    job_id, request_id, entity_id, entity_type, org = one
    flt = search.RunFilter.parse
    by_entity = queries.Filters(entity_type=entity_type, entity_id=entity_id)
    return {
        "console: runs": lambda: search.page(rt, flt({})),
        "console: runs by org (biggest)": lambda: search.page(rt, flt({"org_id": str(big)})),
        "console: runs by job name": lambda: search.page(rt, flt({"job_name": "doc:ocr"})),
        "console: runs RUNNING": lambda: search.page(rt, flt({"status": "RUNNING"})),
        "console: runs by request id": lambda: search.page(rt, flt({"request_id": request_id})),
        "console: runs by entity id": lambda: search.page(rt, flt({"entity_id": entity_id})),
        "console: dead letters": lambda: search.page(rt, flt({}, status="DEAD")),
        "console: run page": lambda: search.run_detail(rt, job_id),
        "status API: org's runs (biggest)": lambda: queries.page(
            rt, org_id=big, filters=queries.Filters(), limit=50
        ),
        "status API: entity's runs": lambda: queries.page(
            rt, org_id=org, filters=by_entity, limit=50
        ),
        "status API: run state (SSE)": lambda: queries.state(rt, job_id, org_id=org),
    }


class _Writes:
    """The run writer's statements on fresh batches: QUEUED, START, PROGRESS, RENEW, FINISH."""

    def __init__(self, conn: psycopg.Connection[Any], batch: int) -> None:
        self.conn = conn
        self.batch = batch
        self.org = str(uuid.uuid4())
        self.ids: list[str] = []

    def _run(self, sql: str, params: Any) -> None:
        with self.conn.transaction():
            self.conn.execute(sql, params)

    def queued(self) -> None:
        self.ids = [f"bench-store:{uuid.uuid4().hex}" for _ in range(self.batch)]
        rows = [{"o": self.org, "n": "email:send", "j": j, "q": "email", "e": j, "p": {"v": 1},
                 "m": j[-16:], "t": time.time()} for j in self.ids]  # fmt: skip
        self._run(run_writer.QUEUED_MANY, (json.dumps(rows),))

    def start(self) -> None:
        rows = [{"o": self.org, "n": "email:send", "j": j, "q": "email", "a": 1, "ma": 3,
                 "m": j[-16:], "w": "bench:1:w", "ls": 30.0} for j in self.ids]  # fmt: skip
        self._run(run_writer.START_MANY, (json.dumps(rows),))

    def progress(self) -> None:
        self._run(run_writer.PROGRESS, ('{"done": 1, "total": 2}', None, self.ids[0], "bench:1:w"))

    def renew(self) -> None:
        self._run(run_writer.RENEW, {"ids": self.ids, "w": "bench:1:w", "ls": 30.0})

    def finish(self) -> None:
        rows = [{"j": j, "s": "COMPLETED", "res": {"ok": True}, "fin": True, "w": "bench:1:w"}
                for j in self.ids]  # fmt: skip
        self._run(run_writer.FINISH_MANY, (json.dumps(rows), self.ids))


def _time_writes(dsn: str, batch: int, samples: int) -> dict[str, dict[str, float]]:
    steps = ("queued", "start", "progress", "renew", "finish")
    times: dict[str, list[float]] = {s: [] for s in steps}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit TO off")
        writes = _Writes(conn, batch)
        for n in range(samples + 5):
            for step in steps:
                t = time.perf_counter()
                getattr(writes, step)()
                if n >= 5:
                    times[step].append((time.perf_counter() - t) * 1000)
    out = {}
    for step, values in times.items():
        runs = "1 run" if step == "progress" else f"{batch} runs"
        out[f"run writer: {step.upper()} ({runs})"] = _summary(values)
    return out


def run(sandbox: Sandbox, rows: int, *, samples: int = 200, batch: int = 16) -> dict[str, Any]:
    """Seed `rows` runs in `sandbox`'s (created) database and time each statement."""
    load = generate(sandbox.dsn, rows, executions_every=10)
    with psycopg.connect(sandbox.dsn) as conn:
        partitions = conn.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'job_runs'::regclass"
        ).fetchone()[0]  # type: ignore[index]
        executions = conn.execute("SELECT count(*) FROM job_executions").fetchone()[0]  # type: ignore[index]
    rt = Runtime(sandbox.settings)
    try:
        timings = {name: _timed(fn, samples) for name, fn in _reads(rt, sandbox.dsn).items()}
    finally:
        rt.close()
    timings |= _time_writes(sandbox.dsn, batch, samples)
    return {
        "runs": rows,
        "executions": executions,
        "job_runs_partitions": partitions,
        "load_s": {k: round(v, 1) for k, v in load.items()},
        "samples": samples,
        "statements": timings,
    }
