"""Where a jobfleet worker process spends its CPU while it drains no-op jobs.

    .venv/bin/python bench/profile_worker.py                  # 20,000 jobs, 2 processes x 8 threads
    .venv/bin/python bench/profile_worker.py --system bare    # the same for bare Dramatiq
    .venv/bin/python bench/profile_worker.py --no-spy         # CPU figures only

N jobs are queued (as in `throughput.py`), the worker group starts and drains them. Printed:
the drain rate; CPU milliseconds per job by process group (the workers, this run's Postgres
backends, Postgres and Redis as a whole, everything else: other sessions on a shared machine)
from /proc; the CPU of each thread of the first worker process (its share of the jobs), which is
how the GIL was shared; and, with py-spy (the optional `bench` extra), the functions that held
the GIL most (`py-spy record --gil`: a sample is taken only from the thread holding it, so the
figures are CPU, not waiting). Files: `--out`.txt (py-spy's raw stacks) and `--out`.log.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from bench import phases
from bench.launcher import WorkerGroup
from bench.proc_cpu import TICK, CpuMeter
from bench.sandbox import Sandbox
from bench.systems import Bare, Fleet
from shared.config import Settings

#: Leaves of a stack that mean "waiting", should a sample land there (GIL hand-over points).
WAITING = re.compile(r"^(_Waiter\.result|Condition\.wait|Event\.wait|Connection\.wait|sleep) ")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread (native id) of `pid`."""
    out: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def thread_names(raw_stacks: Path) -> dict[int, str]:
    """Native thread id -> Python thread name, from py-spy's raw output."""
    names: dict[int, str] = {}
    if raw_stacks.exists():
        for line in raw_stacks.read_text().splitlines():
            m = re.match(r"thread \((\d+)\): ([^;]+);", line)
            if m:
                names[int(m.group(1))] = m.group(2)
    return names


def top_functions(
    raw_stacks: Path, top: int
) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """(samples, [(function, self samples)], [(function, inclusive samples)])."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw_stacks.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")[1:]
        if not frames or WAITING.match(frames[-1]):
            continue
        n = int(count)
        total += n
        own[frames[-1]] += n
        for frame in {re.sub(r":\d+\)", ")", f) for f in frames}:
            inclusive[frame] += n
    return total, own.most_common(top), inclusive.most_common(top)


def run(args: argparse.Namespace) -> dict[str, Any]:
    sandbox = Sandbox(Settings())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    spy_bin = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
    result: dict[str, Any] = {}
    try:
        sandbox.create()
        system = Fleet(sandbox) if args.system == "fleet" else Bare(sandbox)
        result["enqueue"] = phases.enqueue(system, args.jobs)
        timeout = sandbox.settings.worker_idle_timeout_ms if args.system == "fleet" else None
        group = WorkerGroup(
            sandbox, system.app, processes=args.processes, threads=args.threads,
            worker_timeout_ms=timeout, log_path=out.with_suffix(".log"),
        )  # fmt: skip
        with group:
            assert group.proc is not None
            root, pid = group.proc.pid, group.worker_pids()[0]
            with psycopg.connect(sandbox.dsn, autocommit=True) as conn:
                ours = {
                    r[0]
                    for r in conn.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    )
                }
            meter = CpuMeter(
                {
                    "workers": lambda p, comm, up: p == root or root in up,
                    "postgres (this run's)": lambda p, comm, up: p in ours,
                }
            )
            meter.start()
            before = thread_cpu(pid)
            spy = None
            if spy_bin and not args.no_spy:
                spy = subprocess.Popen(
                    [spy_bin, "record", "--pid", str(pid), "--gil", "--threads", "--nonblocking",
                     "--rate", str(args.rate), "--format", "raw", "--output", str(out.with_suffix(".txt"))],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            result["drain"] = phases.drain(system, args.jobs)
            after = thread_cpu(pid)
            result["cpu_ms_per_job"] = meter.stop(args.jobs)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
        system.close()
    finally:
        sandbox.destroy()
    names = thread_names(out.with_suffix(".txt"))
    jobs_here = args.jobs / args.processes
    per_thread: collections.Counter[str] = collections.Counter()
    for tid, cpu in after.items():
        name = names.get(tid, "?")
        if re.fullmatch(r"Thread-\d+", name):
            name = "Dramatiq threads (workers, consumers)"
        per_thread[name] += (cpu - before.get(tid, 0.0)) * 1000 / jobs_here
    result["thread_ms_per_job"] = dict(per_thread.most_common())
    result["loadavg"] = os.getloadavg()
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--system", choices=("fleet", "bare"), default="fleet")
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--no-spy", action="store_true", help="CPU figures only (no py-spy)")
    p.add_argument("--out", default="/tmp/jobfleet-profile", help="path prefix of the files")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    r = run(args)
    d = r["drain"]
    print(f"{args.system}: drain {d['per_s']:,.0f} jobs/s (10 % -> 90 %: {d['steady_per_s']:,.0f})")
    print("CPU ms per job by process group:", r["cpu_ms_per_job"])
    print(f"load average {r['loadavg'][0]:.2f}; threads of one worker process, CPU ms per job:")
    total = sum(r["thread_ms_per_job"].values()) or 1.0
    for name, ms in r["thread_ms_per_job"].items():
        if ms > 0:
            print(f"  {ms:7.3f}  {100 * ms / total:5.1f} %  {name}")
    raw = Path(args.out).with_suffix(".txt")
    if raw.exists():
        samples, own, inclusive = top_functions(raw, args.top)
        print(f"\nGIL held, {samples} samples: self")
        for name, n in own:
            print(f"  {100 * n / samples:5.1f} %  {name}")
        print("inclusive")
        for name, n in inclusive:
            print(f"  {100 * n / samples:5.1f} %  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
