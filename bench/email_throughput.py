"""Emails per second through the email worker processes to a local SMTP server, and the ratio
to a bare aiosmtplib loop against the same server in the same run.

    .venv/bin/python bench/email_throughput.py [--server postfix|sink] [--processes 2]
        [--threads 8] [-n 1000] [--repeat 3]

- server `postfix` (default when installed, root): a private Postfix 3.x instance
  (tests/workers/email/postfix.py) on a loopback port; each message is queued (written and
  fsynced by cleanup) before its 250, then discarded by the queue manager. `sink`: the dev sink
  `python -m workers.email.sink` (each message written and fsynced before its 250).
- bare: N pre-built messages sent with `aiosmtplib.send` (one connection per message),
  `--threads` at a time on one event loop; also one at a time for reference; and over P x T
  persistent connections: bare_pooled (aiosmtplib, one event loop) and bare_threads (smtplib,
  one thread per connection, the worker's transport). The baseline is the better of these two:
  the best a plain client achieves against that server on this machine, in the same run.
- worker: `dramatiq workers.email.app --processes P --threads T` (each process with its SMTP
  connection pool, SMTP_POOL_SIZE = --pool-size, default T); N `email:send` jobs sent through the kernel
  (validation, dedup, run tracking) for rows the worker creates from the payload; each is
  rendered (Jinja2, text + HTML), claimed SENDING and recorded SENT durably.
  Rate = N / (last `sent_at` - first send). Issue 16's target: >= 300 emails/s to a local
  Postfix from 2 worker processes.
Each repetition also prints the CPU milliseconds per email of each group of processes
(bench/proc_cpu.py: worker, postfix, postgres, redis, this process = the bare client or the
jobs' producer, other sessions) and how busy the machine was, the load average and the latency
of a durable Postgres commit; the summary line has `uptime`.
Runs in its own database and broker namespace (bench/sandbox.py), dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import smtplib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import aiosmtplib  # noqa: E402
import psycopg  # noqa: E402

from bench import machine  # noqa: E402
from bench.proc_cpu import CpuMeter  # noqa: E402
from bench.sandbox import Sandbox  # noqa: E402
from shared.config import Settings  # noqa: E402
from workers.email.settings import EmailSettings  # noqa: E402

ORG = uuid.UUID("6be2c4a0-0000-4000-8000-00000000e4a1")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_log(path: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while needle not in path.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"{proc.args!r} not ready:\n{path.read_text(errors='replace')[-2000:]}"
            )
        time.sleep(0.05)


def build_messages(n: int, settings: EmailSettings) -> list[Any]:
    from workers.email.message import build_message, message_id_for
    from workers.email.templates import Templates

    templates = Templates(product_name=settings.product_name)
    out = []
    for i in range(n):
        rendered = templates.render("otp-code", "en", {"CODE": f"{i:06d}", "EXPIRES_MINUTES": "10"})
        msg, _ = build_message(
            rendered, message_id=message_id_for(f"bare-{uuid.uuid4()}", "bench.jobfleet"),
            from_header=settings.from_header, to=f"user{i}@example.com", date=datetime.now(UTC), lang="en",
        )  # fmt: skip
        out.append(msg)
    return out


def bare(messages: list[Any], port: int, concurrency: int) -> float:
    async def run() -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(msg: Any) -> None:
            async with gate:
                errors, _ = await aiosmtplib.send(
                    msg, hostname="127.0.0.1", port=port, start_tls=False, timeout=30
                )
                assert not errors, errors

        await asyncio.gather(*(one(m) for m in messages))

    started = time.perf_counter()
    asyncio.run(run())
    return len(messages) / (time.perf_counter() - started)


def bare_pooled(messages: list[Any], port: int, connections: int) -> float:
    """`connections` persistent connections, each sending its share one after another."""

    async def run() -> None:
        async def lane(share: list[Any]) -> None:
            client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, start_tls=False, timeout=30)
            await client.connect()
            try:
                for msg in share:
                    errors, _ = await client.send_message(msg)
                    assert not errors, errors
            finally:
                await client.quit()

        await asyncio.gather(*(lane(messages[i::connections]) for i in range(connections)))

    started = time.perf_counter()
    asyncio.run(run())
    return len(messages) / (time.perf_counter() - started)


def bare_threads(messages: list[Any], port: int, connections: int) -> float:
    """`connections` persistent smtplib connections, one thread each, each sending its share
    one after another (MAIL, RCPT, DATA): the plain client of the worker's transport."""
    raw = [m.as_bytes() for m in messages]

    def lane(share: list[bytes]) -> None:
        with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
            for content in share:
                client.sendmail("bench@example.com", ["user@example.com"], content)

    lanes = [threading.Thread(target=lane, args=(raw[i::connections],)) for i in range(connections)]
    started = time.perf_counter()
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    return len(raw) / (time.perf_counter() - started)


def through_worker(
    sandbox: Sandbox, n: int, rep: int, enqueue_s: list[float] | None = None
) -> float:
    from shared.jobs import catalog
    from shared.runtime import Runtime

    runtime = Runtime(sandbox.settings)
    try:
        payloads = [
            {"org_id": str(ORG), "entity_id": str(uuid.uuid4()), "template_key": "otp-code", "lang": "en",
             "recipient_email": f"r{rep}-{i}@example.com", "variables": {"CODE": f"{i:06d}", "EXPIRES_MINUTES": "10"}}
            for i in range(n)
        ]  # fmt: skip
        started = datetime.now(UTC)
        for payload in payloads:
            runtime.sender.send(catalog.EMAIL_SEND, payload)
        if enqueue_s is not None:
            enqueue_s.append((datetime.now(UTC) - started).total_seconds())
        ids = [p["entity_id"] for p in payloads]
        deadline = time.monotonic() + 300
        with psycopg.connect(sandbox.dsn, autocommit=True) as conn:
            while True:
                sent, last = conn.execute(
                    "SELECT count(*), max(sent_at) FROM scheduled_emails WHERE status = 'SENT' AND id = ANY(%s::uuid[])",
                    (ids,),
                ).fetchone()  # type: ignore[misc]
                if sent == n:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {sent}/{n} emails sent")
                time.sleep(0.05)
        return float(n / (last - started).total_seconds())
    finally:
        runtime.close()


def start_py_spy(py_spy: Path, worker_pid: int) -> list[tuple[subprocess.Popen[bytes], Path]]:
    """`py-spy record --gil` on each worker process (the children of `worker_pid`)."""
    children = Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()
    spies = []
    for pid in children:
        out = Path(tempfile.mkstemp(prefix=f"py-spy-{pid}-", suffix=".txt")[1])
        cmd = [str(py_spy), "record", "--gil", "--rate", "200", "--format", "raw", "--nonblocking",
               "--pid", pid, "-o", str(out)]  # fmt: skip
        spies.append(
            (subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out)
        )
    time.sleep(0.5)  # attached
    return spies


def stop_py_spy(spies: list[tuple[subprocess.Popen[bytes], Path]], prefix: Path) -> None:
    from bench.stacks import report

    prefix.parent.mkdir(parents=True, exist_ok=True)
    for index, (proc, out) in enumerate(spies):
        proc.send_signal(signal.SIGINT)  # py-spy writes its profile on Ctrl-C
        proc.wait(30)
        kept = prefix.with_name(f"{prefix.name}-worker{index + 1}-py-spy.txt")
        shutil.move(out, kept)
        print(report(kept, top=30), flush=True)
        print(report(kept, top=40, under="deliver"), flush=True)


def baseline_of(figures: dict[str, list[float]], index: int) -> float:
    """The best a plain client achieved: the better of the two persistent-connection loops."""
    return max(figures["bare_pooled"][index], figures["bare_threads"][index])


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from tests.workers.email import postfix as postfix_instance

    parser.add_argument("-n", type=int, default=1000, help="emails per measurement")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=8, help="threads per worker process = bare loop concurrency"
    )
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--pool-size", type=int, help="SMTP_POOL_SIZE of each worker process (default: --threads)"
    )
    parser.add_argument(
        "--server",
        choices=["postfix", "sink"],
        default="postfix" if postfix_instance.available() is None else "sink",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--py-spy",
        type=Path,
        help="py-spy binary: profile the worker processes (--gil) during the first worker "
        "measurement; raw profiles and their tops written next to --json (or in the cwd)",
    )
    args = parser.parse_args()

    sandbox = Sandbox(Settings())
    procs: list[subprocess.Popen[bytes]] = []
    postfix = None
    tmp = Path(tempfile.mkdtemp(prefix="jobfleet-email-bench-"))
    tmp.chmod(0o755)  # Postfix's own users walk into its directories under it
    port = free_port()
    try:
        sandbox.create()
        env = sandbox.env(
            SMTP_PORT=str(port),
            SMTP_HOST="127.0.0.1",
            SMTP_POOL_SIZE=str(args.pool_size or args.threads),
            PYTHONUNBUFFERED="1",
            dramatiq_worker_timeout="50",
        )
        if args.server == "postfix":
            postfix = postfix_instance.Postfix(tmp / "postfix", port=port, deliver=False)
            postfix.start()
        else:
            sink_log = tmp / "sink.log"
            sink = subprocess.Popen(
                [sys.executable, "-m", "workers.email.sink", "--port", str(port), "--maildir", str(tmp / "mail")],
                cwd=REPO, env=env, stdout=open(sink_log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            )  # fmt: skip
            procs.append(sink)
            wait_log(sink_log, "smtp sink on", sink)
        worker_log = tmp / "worker.log"
        worker = subprocess.Popen(
            [sys.executable, "-m", "dramatiq", "workers.email.app", "--processes", str(args.processes),
             "--threads", str(args.threads), "--skip-logging"],
            cwd=REPO, env=env, stdout=open(worker_log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
        )  # fmt: skip
        procs.append(worker)
        wait_log(worker_log, "worker.ready", worker)
        through_worker(sandbox, 20, rep=-1)  # warm-up: imports, pools, template cache

        figures: dict[str, list[float]] = {
            "bare_concurrent": [],
            "bare_pooled": [],
            "bare_threads": [],
            "bare_sequential": [],
            "worker": [],
        }
        # CPU ms per email by process group: the worker's tree, Postfix, Postgres, Redis, this
        # process (the bare client, or the producer of the jobs), other sessions' processes.
        meter = CpuMeter({"worker": lambda pid, comm, up: pid == worker.pid or worker.pid in up})
        cpu: dict[str, list[dict[str, float]]] = {
            "bare_pooled": [],
            "bare_threads": [],
            "worker": [],
        }
        enqueue_s: list[float] = []
        machine_load: list[dict[str, Any]] = []
        for rep in range(args.repeat):
            messages = build_messages(args.n, EmailSettings())
            order = ["worker", "bare"] if rep % 2 else ["bare", "worker"]
            machine_load.append(machine.snapshot(sandbox.dsn))
            for system in order:
                if system == "bare":
                    figures["bare_concurrent"].append(bare(messages, port, args.threads))
                    pool_size = args.threads * args.processes
                    meter.start()
                    figures["bare_pooled"].append(bare_pooled(messages, port, pool_size))
                    cpu["bare_pooled"].append(meter.stop(args.n))
                    meter.start()
                    figures["bare_threads"].append(bare_threads(messages, port, pool_size))
                    cpu["bare_threads"].append(meter.stop(args.n))
                    figures["bare_sequential"].append(bare(messages[: args.n // 2], port, 1))
                else:
                    spies = (
                        start_py_spy(args.py_spy, worker.pid) if args.py_spy and rep == 0 else []
                    )
                    meter.start()
                    figures["worker"].append(through_worker(sandbox, args.n, rep, enqueue_s))
                    cpu["worker"].append(meter.stop(args.n))
                    stop_py_spy(spies, (args.json or Path("email")).with_suffix(""))
            print(
                f"rep {rep + 1}: "
                + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in figures.items())
                + f" (worker/baseline {figures['worker'][-1] / baseline_of(figures, -1):.2f};"
                f" enqueue {enqueue_s[-1]:.2f} s; load {os.getloadavg()[0]:.2f},"
                f" pg commit {machine_load[-1]['pg_commit_ms'] or 0:.2f} ms)",
                flush=True,
            )
            for system, samples in cpu.items():
                print(f"  cpu ms/email {system}: {samples[-1]}", flush=True)

        med = {k: statistics.median(v) for k, v in figures.items()}
        result = {
            "server": args.server, "processes": args.processes,
            "n": args.n, "repeat": args.repeat, "threads": args.threads,
            "pool_size": args.pool_size or args.threads, "median_emails_per_s": med,
            "ratio_worker_to_bare_concurrent": med["worker"] / med["bare_concurrent"],
            "ratio_worker_to_bare_pooled": med["worker"] / med["bare_pooled"],
            "ratio_worker_to_bare_sequential": med["worker"] / med["bare_sequential"],
            "ratio_worker_to_bare_threads": med["worker"] / med["bare_threads"],
            "baseline_emails_per_s": max(med["bare_pooled"], med["bare_threads"]),
            "ratio_worker_to_baseline": med["worker"] / max(med["bare_pooled"], med["bare_threads"]),
            "runs": figures, "enqueue_s": enqueue_s, "cpu_ms_per_email": cpu,
            "machine": machine_load, "uptime": uptime(),
        }  # fmt: skip
        print(json.dumps(result, indent=2))
        print(
            f"fleet {med['worker']:.0f} emails/s ({args.processes} processes x {args.threads} threads,"
            f" SMTP_POOL_SIZE {args.pool_size or args.threads});"
            f" baseline {result['baseline_emails_per_s']:.0f} emails/s (the better of bare_pooled"
            f" {med['bare_pooled']:.0f}/s and bare_threads {med['bare_threads']:.0f}/s:"
            f" {args.processes * args.threads} persistent connections, no jobfleet);"
            f" ratio {result['ratio_worker_to_baseline']:.2f}; medians of {args.repeat};"
            f" uptime: {result['uptime']}"
        )
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
    finally:
        if postfix is not None:
            postfix.stop()
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        sandbox.destroy()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("LOG_LEVEL", "INFO")
    main()
