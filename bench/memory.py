"""Does a jobfleet worker process's memory stay flat over a long run of no-op jobs?

    .venv/bin/python bench/memory.py                 # 100,000 jobs
    .venv/bin/python bench/memory.py --jobs 20000    # shorter

One worker process (`dramatiq bench.apps.fleet --processes 1 --threads 8`, the fleet middleware
with `job_runs` tracking) runs the jobs while one producer sends them in chunks, never more
than two chunks ahead of the worker. The worker's RSS (/proc/PID/status, VmRSS) is sampled
after each chunk. Printed: RSS after warm-up (the first 10 % of the jobs), at the end, the
growth in between and the least-squares slope per 10,000 jobs. Target (DESIGN §9): flat, i.e.
no growth after warm-up; "flat" here means growth under 5 % of the warm-up RSS.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.launcher import WorkerGroup
from bench.report import write_json
from bench.sandbox import Sandbox
from bench.systems import DrainTimeout, Fleet
from shared.config import Settings

RESULTS = Path(__file__).resolve().parent / "results"
FLAT_GROWTH = 0.05


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def slope_per_10k(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of RSS (MB) against jobs done, per 10,000 jobs."""
    if len(points) < 2:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / var * 10_000


def done(fleet: Fleet) -> int:
    return int(fleet.redis.get(fleet.keys.count) or 0)


def wait_done(fleet: Fleet, target: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while done(fleet) < target:
        if time.monotonic() > deadline:
            raise DrainTimeout(f"worker did {done(fleet)}/{target} jobs in {timeout:.0f} s")
        time.sleep(0.05)


def run(args: argparse.Namespace) -> dict[str, Any]:
    sandbox = Sandbox(Settings())
    logs = Path(f"/tmp/jobfleet-bench-{sandbox.run_id}")
    samples: list[tuple[int, float]] = []
    try:
        sandbox.create()
        fleet = Fleet(sandbox)
        group = WorkerGroup(
            sandbox, fleet.app, processes=1, threads=args.threads,
            worker_timeout_ms=sandbox.settings.worker_idle_timeout_ms, log_path=logs / "memory.log",
        )  # fmt: skip
        try:
            with group:
                pid = group.worker_pids()[0]
                samples.append((0, rss_mb(pid)))
                print(f"worker pid {pid}: RSS {samples[0][1]:.1f} MB at boot", flush=True)
                sent = 0
                next_report = args.jobs // 10
                while sent < args.jobs:
                    chunk = min(args.chunk, args.jobs - sent)
                    for _ in range(chunk):
                        fleet.send("drain", args.jobs)
                    sent += chunk
                    wait_done(fleet, sent - args.chunk, timeout=120)  # at most two chunks ahead
                    samples.append((done(fleet), rss_mb(pid)))
                    if samples[-1][0] >= next_report:
                        print(
                            f"  {samples[-1][0]:>9,} jobs done  RSS {samples[-1][1]:7.1f} MB",
                            flush=True,
                        )
                        next_report += args.jobs // 10
                wait_done(fleet, args.jobs, timeout=120)
                samples.append((args.jobs, rss_mb(pid)))
        finally:
            fleet.close()
    except BaseException:
        print(f"failed; worker log kept in {logs}", file=sys.stderr)
        raise
    finally:
        sandbox.destroy()
    (logs / "memory.log").unlink(missing_ok=True)
    if logs.is_dir():
        logs.rmdir()
    return summarize(samples, args)


def summarize(samples: list[tuple[int, float]], args: argparse.Namespace) -> dict[str, Any]:
    warm_jobs = int(args.jobs * args.warmup)
    after = [s for s in samples if s[0] >= warm_jobs]
    warm_rss, end_rss = after[0][1], after[-1][1]
    growth = end_rss - warm_rss
    return {
        "jobs": args.jobs,
        "threads": args.threads,
        "warmup_jobs": warm_jobs,
        "rss_boot_mb": samples[0][1],
        "rss_after_warmup_mb": warm_rss,
        "rss_end_mb": end_rss,
        "rss_peak_mb": max(s[1] for s in after),
        "growth_mb": growth,
        "growth_pct": 100 * growth / warm_rss,
        "slope_mb_per_10k_jobs": slope_per_10k(after),
        "flat": growth <= FLAT_GROWTH * warm_rss,
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--chunk", type=int, default=1_000, help="jobs sent between two RSS samples")
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of the jobs that is warm-up")
    p.add_argument("--results", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    # SIGTERM (a timeout, a CI cancel) unwinds like Ctrl-C: worker stopped, database dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = run(args)
    slope = result["slope_mb_per_10k_jobs"]
    print(
        f"\nRSS after warm-up ({result['warmup_jobs']:,} jobs): {result['rss_after_warmup_mb']:.1f} MB; "
        f"at the end ({result['jobs']:,} jobs): {result['rss_end_mb']:.1f} MB; "
        f"growth {result['growth_mb']:+.1f} MB ({result['growth_pct']:+.1f} %); "
        f"slope {slope:+.2f} MB per 10,000 jobs; peak {result['rss_peak_mb']:.1f} MB"
        if slope is not None
        else f"\nRSS after warm-up {result['rss_after_warmup_mb']:.1f} MB, end {result['rss_end_mb']:.1f} MB"
    )
    print(
        "memory: flat (target met)"
        if result["flat"]
        else "memory: GROWING after warm-up (target missed)"
    )
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = write_json(args.results, f"memory-{stamp}.json", result)
    print(f"results: {path}")
    return 0 if result["flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
