"""`POST /exports` latency of the example product API under uvicorn, at a fixed request rate.

    .venv/bin/python bench/product_api.py                       # 50 requests/s, 500 requests
    .venv/bin/python bench/product_api.py --rate 100 --count 1000

In a private database and broker namespace (`Sandbox`), starts
`uvicorn examples.product_api.app:create_app --factory` on a loopback port (one process), then
sends `--count` requests at `--rate` per second on a fixed schedule (open loop: a slow answer does
not delay the next request), after a warm-up at the same rate. Each request validates, inserts the `exports` row and stages
`export:build` through the outbox in one transaction. Latency is measured from the request's
scheduled time, so queueing behind a slow request counts (no coordinated omission). Printed:
p50/p95/p99/max, the achieved rate, the answers by status, and the rows and outbox events
committed (both must equal the 202 answers). No relay and no worker run: this is the API's cost.
The machine is shared: repeat and compare.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import psycopg

from bench.sandbox import Sandbox
from bench.stats import summary_ms
from shared.config import Settings

KEY = "bench-key"
ORG = "00000000-0000-4000-8000-0000000be4c0"
BODY = {"type": "JOB_RUNS", "params": {"format": "CSV", "filters": {"status": ["DEAD"]}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_api(sandbox: Sandbox, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = sandbox.env(
        PRODUCT_API_KEYS=json.dumps({KEY: {"org": ORG, "name": "bench"}}),
        LOG_LEVEL="WARNING",
    )
    argv = [
        sys.executable, "-m", "uvicorn", "examples.product_api.app:create_app", "--factory",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, cwd=sandbox_repo(), stdout=out, stderr=out)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the API exited ({proc.returncode}); see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the API did not answer within 60 s; see {log}")


def sandbox_repo() -> str:
    return str(Path(__file__).resolve().parent.parent)


def load(url: str, rate: float, count: int, threads: int, warmup_s: float) -> dict[str, Any]:
    """`warmup_s` of requests at `rate` first (connections, pools, first imports: not measured),
    then `count` measured ones on the same schedule."""
    clients = [
        httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=30) for _ in range(threads)
    ]
    free: queue.SimpleQueue[httpx.Client] = queue.SimpleQueue()
    for c in clients:
        free.put(c)
    latencies: list[float] = []
    statuses: Counter[int | str] = Counter()
    lock = threading.Lock()

    def one(due: float, measured: bool) -> None:
        client = free.get()
        try:
            status: int | str = client.post("/exports", json=BODY).status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        finally:
            free.put(client)
        done = time.perf_counter()
        with lock:
            statuses[status] += 1
            if measured:
                latencies.append(done - due)

    warmup = int(rate * warmup_s)
    start = time.perf_counter() + 0.1
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for i in range(warmup + count):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, due, i >= warmup)
    elapsed = time.perf_counter() - start
    for c in clients:
        c.close()
    return {
        **{k: round(v, 2) for k, v in summary_ms(latencies).items()},
        "warmup_requests": warmup,
        "offered_rate": rate,
        "achieved_rate": round((warmup + count) / elapsed, 1),
        "statuses": dict(statuses),
    }


def committed(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        exports = conn.execute("SELECT count(*) FROM exports").fetchone()
        events = conn.execute(
            "SELECT count(*) FROM outbox_events WHERE job_name = 'export:build'"
        ).fetchone()
    return {"exports": exports[0] if exports else 0, "outbox_events": events[0] if events else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--count", type=int, default=500, help="requests measured")
    parser.add_argument("--threads", type=int, default=16, help="client threads")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds not measured first")
    args = parser.parse_args()

    sandbox = Sandbox(Settings())
    log = Path(tempfile.mkdtemp(prefix="bench-product-api-")) / "api.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        sandbox.create()
        port = free_port()
        proc = start_api(sandbox, port, log)
        result = load(f"http://127.0.0.1:{port}", args.rate, args.count, args.threads, args.warmup)
        result["committed"] = committed(sandbox.dsn)
        result["cpus"] = os.cpu_count()
        print(json.dumps({"bench": "product_api POST /exports", **result}, indent=2))
        accepted = result["statuses"].get(202, 0)
        if result["committed"] != {"exports": accepted, "outbox_events": accepted}:
            raise SystemExit("committed rows do not match the 202 answers")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        sandbox.destroy()


if __name__ == "__main__":
    main()
