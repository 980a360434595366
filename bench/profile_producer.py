"""What a send costs the producer process: jobfleet's `JobSpec.send` against bare Dramatiq's
`actor.send`, in CPU per send, with the producer's threads apart.

    .venv/bin/python bench/profile_producer.py              # 20,000 sends each, 3 rounds
    .venv/bin/python bench/profile_producer.py --rounds 1

Each round sends N no-op jobs with jobfleet (validation, stable id, dedup + enqueue in one Redis
call, the QUEUED row handed to the producer's group-commit writer and written before the round
ends), then N with bare Dramatiq, from this process's one thread, no worker running. Printed per
round: sends/s of each, their ratio, the process's CPU microseconds per send (all its threads),
and jobfleet's by thread (the sending thread; the others, mostly the QUEUED-row writer), with
this run's Postgres (its backends and the WAL writer) and Redis per send. CPU per
send moves less than a rate with the other load of a shared machine: compare trees with it
(alternated runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import machine
from bench.proc_cpu import CpuMeter
from bench.profile_worker import thread_cpu as threads_cpu
from bench.sandbox import Sandbox
from bench.systems import Bare, Fleet
from shared.config import Settings


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's sending thread and of its other threads (the QUEUED-row
    writer, mostly: Python 3.11 does not give threads their names in /proc)."""
    pid = os.getpid()
    out = {"sending thread": 0.0, "other threads": 0.0}
    for tid, seconds in threads_cpu(pid).items():
        out["sending thread" if tid == pid else "other threads"] += seconds
    return out


def measure(
    system: Fleet | Bare, n: int, database: str | None = None
) -> tuple[float, float, dict[str, float]]:
    """(sends/s, process CPU µs per send, {thread or server: CPU µs per send}): the servers'
    too, since they share the 2 cores with the producer: Redis (its every client's work),
    Postgres (with `database`: this run's backends and the server's WAL writer and other
    background processes; without, every Postgres process, other sessions' work included)."""
    meter = machine.send_cpu(database) if database is not None else CpuMeter({})
    meter.start()
    before, started, cpu = thread_cpu(), time.perf_counter(), time.process_time()
    for _ in range(n):
        system.send("drain", n)
    system.flush()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    after = thread_cpu()
    servers = meter.stop(n)
    threads = {k: (v - before.get(k, 0.0)) / n * 1e6 for k, v in after.items()}
    if database is not None:  # this run's Postgres work: its backends and the WAL writer's
        servers["postgres"] = servers.get("postgres_run", 0.0) + servers.get(
            "postgres_background", 0.0
        )
    threads.update((k, servers.get(k, 0.0) * 1000) for k in ("postgres", "redis"))
    return n / seconds, cpu / n * 1e6, {k: v for k, v in threads.items() if v >= 0.5}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--jobs", "-n", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    sandbox = Sandbox(Settings())
    try:
        sandbox.create()
        fleet, bare = Fleet(sandbox), Bare(sandbox)
        try:
            fleet.send("lat", 0)  # first send: the migration check and the writer's connection
            fleet.flush()
            for r in range(1, args.rounds + 1):
                sandbox.reset()
                f_rate, f_cpu, f_threads = measure(fleet, args.jobs, sandbox.database_name)
                b_rate, b_cpu, b_threads = measure(bare, args.jobs, sandbox.database_name)
                threads = ", ".join(f"{k} {v:.1f}" for k, v in sorted(f_threads.items()))
                servers = ", ".join(
                    f"{k} {b_threads.get(k, 0.0):.1f}" for k in ("postgres", "redis")
                )
                print(
                    f"round {r}: jobfleet {f_rate:,.0f} sends/s ({f_cpu:.1f} µs CPU each: "
                    f"{threads}); bare Dramatiq {b_rate:,.0f} sends/s ({b_cpu:.1f} µs CPU; "
                    f"{servers}); jobfleet/bare {f_rate / b_rate:.2f}x, by CPU "
                    f"{b_cpu / f_cpu:.2f}x; load average {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        finally:
            fleet.close()
            bare.close()
    finally:
        sandbox.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
