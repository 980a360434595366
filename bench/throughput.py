"""Bare Dramatiq vs jobfleet vs Celery, no-op jobs, in one run on the same Redis and Postgres.

    .venv/bin/python bench/throughput.py            # N=20,000, one repetition
    .venv/bin/python bench/throughput.py --quick    # N=2,000, fewer latency/wake-up samples
    .venv/bin/python bench/throughput.py --repeat 3 # medians of 3 (DESIGN §9 figures)
    .venv/bin/python bench/throughput.py --only enqueue --repeat 5 --no-celery  # enqueue alone

Each repetition measures, for bare Dramatiq, jobfleet and Celery in turn (the order rotates
from one repetition to the next): enqueue/s from one producer thread with no worker running;
drain jobs/s of those N jobs by 2 worker processes (x 8 threads for Dramatiq, started with the
`dramatiq` CLI; Celery: prefork with 2 processes); send-to-start latency at a paced 100 jobs/s;
send-to-start after the workers sat idle. Then the idle wake-up of bare Dramatiq with a 100 ms
worker timeout, for reference, and at the end the idle cost of jobfleet worker processes
(Redis commands per second, `bench/idle_cost.py`). Celery is measured only when installed (the
optional `bench` extra); its column says "not installed" otherwise. The run gets its own broker
namespace and database (both removed at the end), prints a table and writes JSON to
bench/results/. See bench/README.md for how to read it.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dramatiq

from bench import idle_cost, machine, phases
from bench.launcher import CeleryGroup, WorkerGroup
from bench.report import aggregate, paired_ratios, render, render_idle, verdicts, write_json
from bench.sandbox import Sandbox
from bench.systems import Bare, CelerySystem, System, celery_version, make
from shared.config import Settings

RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument(
        "--jobs", "-n", type=int, default=None, help="jobs to enqueue and drain (20,000)"
    )
    p.add_argument("--quick", action="store_true", help="N=2,000, 300 latency jobs, 5 wake-ups")
    p.add_argument("--repeat", type=int, default=1, help="repetitions; figures are medians (1)")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--rate", type=float, default=100.0, help="paced send rate of the latency test")
    p.add_argument("--latency-jobs", type=int, default=None, help="jobs sent at --rate (1,000)")
    p.add_argument("--wake-samples", type=int, default=None, help="idle wake-ups measured (20)")
    p.add_argument("--idle", type=float, default=2.0, help="seconds idle before each wake-up")
    p.add_argument("--results", type=Path, default=RESULTS, help="directory of the JSON results")
    p.add_argument("--no-celery", action="store_true", help="leave Celery out even if installed")
    p.add_argument(
        "--idle-window", type=float, default=20.0, help="seconds of the idle-cost window (20)"
    )
    p.add_argument("--no-idle-cost", action="store_true", help="skip the idle-cost measurement")
    p.add_argument(
        "--only",
        choices=("enqueue",),
        default=None,
        help="only this phase (enqueue: no worker is started, no idle cost)",
    )
    args = p.parse_args(argv)
    if args.only == "enqueue":
        args.no_idle_cost = True
    args.jobs = args.jobs or (2_000 if args.quick else 20_000)
    args.latency_jobs = args.latency_jobs or (300 if args.quick else 1_000)
    args.wake_samples = args.wake_samples or (5 if args.quick else 20)
    return args


def measure(
    name: str, sandbox: Sandbox, args: argparse.Namespace, rng: random.Random, logs: Path
) -> dict[str, Any]:
    """Enqueue, drain, paced latency and idle wake-up of one system."""
    system: System = make(name, sandbox)
    timeout = None if isinstance(system, Bare) else sandbox.settings.worker_idle_timeout_ms
    try:
        out: dict[str, Any] = {"machine_before": machine.snapshot(sandbox.dsn, system.redis)}
        if isinstance(system, Bare) and not isinstance(system, CelerySystem):
            out["middleware"] = system.middleware
        _say(f"{name}: enqueue {args.jobs:,}")
        out["enqueue"] = phases.enqueue(system, args.jobs, sandbox.database_name)
        if args.only == "enqueue":
            out["machine_after"] = machine.snapshot(sandbox.dsn, system.redis)
            return out
        kind = CeleryGroup if isinstance(system, CelerySystem) else WorkerGroup
        group = kind(
            sandbox, system.app, processes=args.processes, threads=args.threads,
            worker_timeout_ms=timeout, log_path=logs / f"{name}.log",
        )  # fmt: skip
        with group:
            _say(f"{name}: drain")
            out["drain"] = phases.drain(system, args.jobs)
            _say(f"{name}: latency at {args.rate:g}/s")
            out["latency"] = phases.latency(system, args.latency_jobs, args.rate)
            _say(f"{name}: idle wake-up x {args.wake_samples}")
            out["wakeup"] = phases.wakeup(system, args.wake_samples, args.idle, rng)
        out["machine_after"] = machine.snapshot(sandbox.dsn, system.redis)
        return out
    finally:
        system.close()


def wake_bare_100(
    sandbox: Sandbox, args: argparse.Namespace, rng: random.Random, logs: Path
) -> dict[str, Any]:
    system = Bare(sandbox)
    try:
        _say(f"bare (100 ms worker timeout): idle wake-up x {args.wake_samples}")
        group = WorkerGroup(
            sandbox, system.app, processes=args.processes, threads=args.threads,
            worker_timeout_ms=100, log_path=logs / "bare_100.log",
        )  # fmt: skip
        with group:
            return {"wakeup": phases.wakeup(system, args.wake_samples, args.idle, rng)}
    finally:
        system.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    sandbox = Sandbox(Settings())
    logs = Path(f"/tmp/jobfleet-bench-{sandbox.run_id}")
    rng = random.Random()
    reps: list[dict[str, Any]] = []
    started = datetime.now(UTC)
    celery = None if args.no_celery else celery_version()
    names = ["bare", "fleet"] + (["celery"] if celery else [])
    try:
        sandbox.create()
        for i in range(args.repeat):
            sandbox.reset()
            order = names[i % len(names) :] + names[: i % len(names)]
            _say(f"repetition {i + 1}/{args.repeat} ({' then '.join(order)})")
            rep = {name: measure(name, sandbox, args, rng, logs / f"rep{i + 1}") for name in order}
            if args.only is None:
                rep["bare_100"] = wake_bare_100(sandbox, args, rng, logs / f"rep{i + 1}")
            reps.append(rep)
    except BaseException:
        _say(f"failed; worker logs kept in {logs}")
        raise
    finally:
        sandbox.destroy()
    _remove_logs(logs)
    idle = None
    if not args.no_idle_cost:
        _say(f"idle cost: {args.processes} idle jobfleet processes, {args.idle_window:g} s")
        idle = idle_cost.run(
            argparse.Namespace(
                processes=args.processes, threads=args.threads, window=args.idle_window,
                warmup=3.0, wakes=5, idle=args.idle,
            )
        )  # fmt: skip
    summary = aggregate(reps)
    ratios = paired_ratios(reps)
    config = {
        "jobs": args.jobs,
        "processes": args.processes,
        "threads": args.threads,
        "rate": args.rate,
        "latency_jobs": args.latency_jobs,
        "wake_samples": args.wake_samples,
        "idle_s": args.idle,
        "repeat": args.repeat,
        "only": args.only,
        "bare_worker_timeout_ms": 1000,
        "fleet_worker_timeout_ms": sandbox.settings.worker_idle_timeout_ms,
        "bare_middleware": reps[0]["bare"]["middleware"],
        "celery": celery or "not installed",
    }
    return {
        "run_id": sandbox.run_id,
        "started_at": started.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "dramatiq": dramatiq.__version__,
            "celery": celery,
            "loadavg_end": os.getloadavg(),
        },
        "config": config,
        "repetitions": reps,
        "idle_cost": idle,
        "median": summary,
        "ratios": ratios,
        "targets": verdicts(summary, ratios),
    }


def _remove_logs(logs: Path) -> None:
    if logs.is_dir():
        for path in sorted(logs.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        logs.rmdir()


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM (a timeout, a CI cancel) unwinds like Ctrl-C: workers stopped, database dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = run(args)
    print(render(result["median"], result["config"], result["machine"], result["ratios"]))
    if result["idle_cost"] is not None:
        print(render_idle(result["idle_cost"]))
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = write_json(args.results, f"throughput-{stamp}-{result['run_id']}.json", result)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
