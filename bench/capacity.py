"""What one job costs Redis and Postgres, and what one worker process drains (docs/scaling.md).

    .venv/bin/python bench/capacity.py              # N=5,000 no-op jobs, 1 worker process x 8
    .venv/bin/python bench/capacity.py -n 20000 --threads 16
    .venv/bin/python bench/capacity.py --store-rows 10000000  # the run store's statements (bench/store.py)

A private redis-server on a free loopback port (so that INFO commandstats counts this run's
commands only, not those of the other sessions sharing the machine's Redis) and the run's own
database on the machine's Postgres (pg_stat_database counts per database). Phases:

1. enqueue: N sends of the bench's no-op job (`bench/jobs.py`, its body one INCR) from one
   producer, its QUEUED rows written; the producer's connections closed (their statistics
   reach pg_stat_database when a backend ends);
2. drain: one `dramatiq bench.apps.fleet` process runs them; stopped once every run is
   COMPLETED.

Prints, per job and per phase: Redis commands by name (the job body's INCR and the bench's own
GETs left out), Postgres transactions and rows inserted/updated/deleted; the drain's jobs/s; and
the Redis memory the dedup keys hold per million jobs (used_memory after the drain, when the
queues are empty, minus before the sends; and MEMORY USAGE of sampled keys).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
import redis

from bench.jobs import Keys, marks
from bench.launcher import WorkerGroup
from bench.redis_server import commandstats, private_redis
from bench.sandbox import Sandbox
from bench.systems import Fleet
from shared.broker import dedup_key
from shared.config import Settings

PG_COUNTERS = ("xact_commit", "tup_inserted", "tup_updated", "tup_deleted")
#: Commands only this script sends (its snapshots, the dedup key listing); the job body's
#: INCR and HSETs and this script's GETs are subtracted by count (`fleet_commands`).
BENCH_COMMANDS = {"info", "memory|usage", "scan", "ttl"}


@contextmanager
def capacity_redis() -> Iterator[str]:
    directory = Path(tempfile.mkdtemp(prefix="jobfleet-capacity-redis-"))
    try:
        with private_redis(directory) as url:
            yield url
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def redis_cpu_s(client: redis.Redis) -> float:
    """CPU time of the whole (private) redis-server so far: commands, network, everything."""
    info: dict[str, Any] = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def pg_counters(dsn: str, database: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            f"SELECT {', '.join(PG_COUNTERS)} FROM pg_stat_database WHERE datname = %s",
            (database,),
        ).fetchone()
    assert row is not None
    return dict(zip(PG_COUNTERS, (int(v) for v in row), strict=True))


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def fleet_commands(counts: dict[str, int], own: dict[str, int]) -> dict[str, int]:
    """`counts` without this script's and the job body's own commands."""
    left = {k: v - own.get(k, 0) for k, v in counts.items() if k not in BENCH_COMMANDS}
    return {k: v for k, v in left.items() if v}


def per_job(counts: dict[str, int], n: int) -> dict[str, float]:
    return {k: round(v / n, 3) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}


def completed(dsn: str) -> int:
    """One transaction in the run's database (counted, and subtracted from the figures)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM job_runs WHERE status = 'COMPLETED'").fetchone()
    return int(row[0]) if row else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--jobs", "-n", type=int, default=5_000)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument("--store-rows", type=int, default=0,
                   help="instead: the run store's statements on this many partitioned runs "
                   "(bench/store.py)")  # fmt: skip
    p.add_argument("--store-samples", type=int, default=200)
    p.add_argument("--store-batch", type=int, default=16)
    args = p.parse_args(argv)
    n = args.jobs
    if args.store_rows:
        return store_main(args)

    with capacity_redis() as redis_url:
        base = Settings(
            redis_url=redis_url,
            database_url=os.environ.get("DATABASE_URL", Settings().database_url),
        )
        sandbox = Sandbox(base)
        database = f"jobfleet_bench_{sandbox.run_id}"
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        try:
            sandbox.create()
            admin = sandbox.dsn.rsplit("/", 1)[0] + "/postgres"
            time.sleep(1.0)  # the migrations' statistics reach pg_stat_database
            fleet = Fleet(sandbox)
            fleet.runtime.broker  # noqa: B018  (built before the first snapshot)
            mem0 = int(client.info("memory")["used_memory"])
            r0, p0 = commandstats(client), pg_counters(admin, database)
            cpu0 = redis_cpu_s(client)

            started = time.perf_counter()
            for _ in range(n):
                fleet.send("drain", n)
            fleet.flush()
            enqueue_s = time.perf_counter() - started
            dedup_keys = list(client.scan_iter(dedup_key(sandbox.namespace, "*"), count=1000))
            fleet.close()
            time.sleep(1.5)
            r1, p1 = commandstats(client), pg_counters(admin, database)

            log = Path(tempfile.mkdtemp(prefix="jobfleet-capacity-")) / "worker.log"
            group = WorkerGroup(
                sandbox,
                "bench.apps.fleet",
                processes=1,
                threads=args.threads,
                worker_timeout_ms=None,
                log_path=log,
            )
            group.start()
            t0 = time.perf_counter()
            first_done: float | None = None
            count_key, gets, polls = Keys(sandbox.namespace, "fleet").count, 0, 0
            while (ran := int(client.get(count_key) or 0)) < n:  # the job bodies' INCRs
                gets += 1
                if ran and first_done is None:
                    first_done = time.perf_counter()
                if time.perf_counter() - t0 > 60 + n / 20:
                    raise RuntimeError(f"{ran} of {n} ran: {group.tail()}")
                time.sleep(0.02)
            gets += 1
            while completed(sandbox.dsn) < n:  # and their runs are COMPLETED
                polls += 1
                time.sleep(0.1)
            polls += 1
            drain_s = time.perf_counter() - (first_done or t0)
            group.stop()
            time.sleep(1.5)
            r2, p2 = commandstats(client), pg_counters(admin, database)
            cpu2 = redis_cpu_s(client)
            mem2 = int(client.info("memory")["used_memory"])
            sample = dedup_keys[:200]
            usage = [int(client.memory_usage(k) or 0) for k in sample]
            ttl_s = int(client.ttl(sample[0])) if sample else -1
            keys_left = sum(1 for _ in client.scan_iter(f"{sandbox.namespace}:*", count=1000))
        finally:
            client.close()
            sandbox.destroy()

    body = {"incr": n, "hset": len(marks(n)), "get": gets}
    enqueue_cmds = fleet_commands(delta(r1, r0), {})
    drain_cmds = fleet_commands(delta(r2, r1), body)
    fleet_cmds = fleet_commands(delta(r2, r0), body)
    drain_pg = delta(p2, p1)
    drain_pg["xact_commit"] = drain_pg.get("xact_commit", 0) - polls
    total_pg = {k: v + delta(p1, p0).get(k, 0) for k, v in drain_pg.items()}
    figures = {
        "jobs": n,
        "worker": {"processes": 1, "threads": args.threads},
        "enqueue": {
            "seconds": round(enqueue_s, 2),
            "jobs_per_s": round(n / enqueue_s),
            "redis_per_job": per_job(enqueue_cmds, n),
            "postgres_per_job": per_job(delta(p1, p0), n),
        },
        "drain": {
            "seconds": round(drain_s, 2),
            "jobs_per_s_per_process": round(n / drain_s),
            "redis_per_job": per_job(drain_cmds, n),
            "postgres_per_job": per_job(drain_pg, n),
        },
        "total": {
            # Commands run inside Lua scripts count under their own names too.
            "redis_commands_per_job": round(sum(fleet_cmds.values()) / n, 2),
            "redis_scripts_per_job": round(fleet_cmds.get("evalsha", 0) / n, 2),
            # An upper bound (the job bodies' INCRs and this script's polling are in it).
            "redis_cpu_us_per_job": round((cpu2 - cpu0) * 1e6 / n, 1),
            "postgres_transactions_per_job": round(total_pg.get("xact_commit", 0) / n, 3),
            "postgres_rows_written_per_job": round(
                sum(v for k, v in total_pg.items() if k.startswith("tup_")) / n, 2
            ),
        },
        "dedup_keys": {
            "keys": len(dedup_keys),
            "keys_left_after_drain": keys_left,
            "ttl_days": round(ttl_s / 86_400, 1),
            "memory_usage_bytes_each": round(sum(usage) / len(usage), 1) if usage else None,
            # The whole instance's growth (the dedup keys, and what else stayed) per key.
            "used_memory_delta_per_key": round((mem2 - mem0) / max(len(dedup_keys), 1), 1),
            "mb_per_million_jobs": round(
                (sum(usage) / len(usage) if usage else 0) * 1_000_000 / 2**20, 1
            ),
        },
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def store_main(args: argparse.Namespace) -> int:
    from bench import store

    sandbox = Sandbox(Settings())
    try:
        sandbox.create()
        figures = store.run(
            sandbox, args.store_rows, samples=args.store_samples, batch=args.store_batch
        )
    finally:
        sandbox.destroy()
    width = max(len(name) for name in figures["statements"])
    for name, t in figures["statements"].items():
        print(f"{name:<{width}}  p50 {t['p50_ms']:>8.2f} ms  p95 {t['p95_ms']:>8.2f} ms")
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
