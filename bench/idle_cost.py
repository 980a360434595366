"""Idle cost: Redis commands per second of an idle worker process, and its wake-up latency.

    .venv/bin/python bench/idle_cost.py                 # 2 idle processes, 20 s window
    .venv/bin/python bench/idle_cost.py --processes 4 --window 30

A private `redis-server` (AOF on, as in production) on a free port serves the broker only, so
its `INFO commandstats` counts the fleet's commands and nothing else; Postgres is the shared one
(a private database of this run). The worker processes are `dramatiq bench.apps.fleet`, booted
like every domain worker, with `make run`'s idle timeout. After a warm-up the counters are reset,
the fleet sits idle for `--window` seconds, and the calls of each command (those run inside Lua
scripts included) are divided by the window and the number of processes. Then a few jobs sent
after `--idle` seconds of silence give the idle wake-up (send to start). DESIGN §9's budget: at
most 10 commands/s per idle process, wake-up <= 5 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis

from bench.jobs import NOOP, Keys
from bench.launcher import WorkerGroup
from bench.redis_server import commandstats, private_redis
from bench.sandbox import Sandbox
from shared.config import Settings, get_settings
from shared.runtime import Runtime

BUDGET_PER_PROCESS = 10.0


def aof_bytes(client: redis.Redis) -> int:
    return int(client.info("persistence").get("aof_current_size", 0))


def wakeups(runtime: Runtime, keys: Keys, count: int, idle_s: float) -> list[float]:
    """Send-to-start of jobs each sent after `idle_s` of silence (ms)."""
    client = redis.Redis.from_url(runtime.settings.redis_url)
    samples: list[float] = []
    for n in range(count + 1):  # the first warms the producer up (its first send checks the
        # schema revision), unmeasured
        time.sleep(idle_s)
        before = client.llen(keys.samples("wake"))
        payload = {
            "org_id": str(uuid.UUID(int=0)),
            "entity_id": str(uuid.uuid4()),
            "sent_at": time.time(),
            "tag": "wake",
        }
        runtime.sender.send(NOOP, payload)
        deadline = time.monotonic() + 10
        while client.llen(keys.samples("wake")) == before:
            if time.monotonic() > deadline:
                raise RuntimeError("a job sent to the idle fleet did not start within 10 s")
            time.sleep(0.002)
        if n:
            samples.append(float(client.lindex(keys.samples("wake"), -1) or 0) * 1000)
    client.close()
    return samples


def run(args: argparse.Namespace) -> dict[str, Any]:
    base = get_settings()
    with (
        tempfile.TemporaryDirectory(prefix="jobfleet-idle-") as tmp,
        private_redis(Path(tmp), appendonly=True) as redis_url,
    ):
        sandbox = Sandbox(Settings(redis_url=redis_url, database_url=base.database_url))
        sandbox.create()
        client = redis.Redis.from_url(redis_url)
        try:
            group = WorkerGroup(
                sandbox,
                "bench.apps.fleet",
                processes=args.processes,
                threads=args.threads,
                worker_timeout_ms=base.worker_idle_timeout_ms,
                log_path=Path(tmp) / "workers.log",
            )
            with group:
                time.sleep(args.warmup)
                client.config_resetstat()
                aof_before = aof_bytes(client)
                time.sleep(args.window)
                calls = commandstats(client)
                aof_after = aof_bytes(client)
                runtime = Runtime(sandbox.settings)
                try:
                    wake = wakeups(runtime, Keys(sandbox.namespace, "fleet"), args.wakes, args.idle)
                finally:
                    runtime.close()
        finally:
            client.close()
            sandbox.destroy()
    calls.pop("config|resetstat", None)
    calls.pop("config", None)
    calls.pop("info", None)
    per_process = {name: n / args.window / args.processes for name, n in sorted(calls.items()) if n}
    total = sum(per_process.values())
    return {
        "processes": args.processes,
        "threads": args.threads,
        "window_s": args.window,
        "commands_per_s_per_process": round(total, 2),
        "by_command": {k: round(v, 2) for k, v in per_process.items()},
        "aof_bytes_per_min": round((aof_after - aof_before) / args.window * 60),
        "wakeup_ms": {
            "median": round(statistics.median(wake), 2),
            "max": round(max(wake), 2),
            "samples": len(wake),
        },
        "budget_per_process": BUDGET_PER_PROCESS,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--processes", type=int, default=2, help="idle worker processes")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--window", type=float, default=20.0, help="seconds measured")
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--wakes", type=int, default=5, help="idle wake-ups measured")
    p.add_argument("--idle", type=float, default=2.0, help="seconds idle before each wake-up")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"idle worker process: {result['commands_per_s_per_process']} Redis commands/s"
            f" (budget {BUDGET_PER_PROCESS}); {args.processes} processes x {args.threads}"
            f" threads, {args.window:.0f} s window"
        )
        for name, rate in sorted(result["by_command"].items(), key=lambda kv: -kv[1]):
            print(f"  {name:<16} {rate:>8.2f}/s")
        print(f"AOF growth: {result['aof_bytes_per_min'] / 1024:.1f} KiB/min")
        w = result["wakeup_ms"]
        print(f"idle wake-up: median {w['median']} ms, max {w['max']} ms ({w['samples']} jobs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
