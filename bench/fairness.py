"""Fair share: the start latency of a small org's job sent behind a large org's burst, before
(one FIFO list per queue: the earlier layout) and after (lanes, docs/kernel.md "Fair share").

    .venv/bin/python bench/fairness.py                       # 2 processes x 8 threads, 2,000-job burst
    .venv/bin/python bench/fairness.py --burst 5000 --rounds 3

A private `redis-server` serves the broker; Postgres is the shared one (a private database of
this run). The workers are `dramatiq bench.apps.fleet` (the no-op job, booted like a domain
worker). Each round: org A sends `--burst` no-op jobs as fast as one producer can, then org B
sends one once the fleet has started on the burst (5 % done); B's send-to-start latency is what the job itself records. "before" sends every job
of the round without a lane (the send script's four arguments): they wait in the queue's own
list in send order, as every job did before lanes. "after" sends them as the fleet's producers
do (`JobSpec.send`: each org's lane). Prints the medians over `--rounds`.
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
from bench.redis_server import private_redis
from bench.sandbox import Sandbox
from shared import pauses
from shared.broker import codec, dedup_key, lanes
from shared.config import Settings, get_settings
from shared.jobs.message import build_message
from shared.runtime import Runtime


def send_without_lane(runtime: Runtime, payload: dict[str, Any]) -> None:
    """A send as before lanes: the send script with its first four arguments only."""
    model, wire = NOOP.contract.build_wire(payload)
    job_id = NOOP.job_id(model, wire)
    message = build_message(
        job_name=NOOP.name, queue=NOOP.queue, payload=wire, job_id=job_id,
        org_id=model.org_id, entity_type=NOOP.entity_type, entity_id=str(model.entity_id),
        request_id=None,
    )  # fmt: skip
    redis_id = str(uuid.uuid4())
    message = message.copy(options={"redis_message_id": redis_id})
    gate = runtime.sender.gate
    script = gate.broker.__dict__.setdefault(
        "bench_enqueue", gate.broker.client.register_script(lanes.ENQUEUE)
    )
    full = f"{gate.namespace}:{NOOP.queue}"
    script(
        keys=[dedup_key(gate.namespace, job_id), f"{full}.msgs", full, f"{full}.wake"],
        args=[message.message_id, gate.window_ms, redis_id, codec.encode(message)],
    )


def one_round(runtime: Runtime, keys: Keys, burst: int, *, laned: bool) -> float:
    """B's send-to-start latency (ms) behind A's burst of `burst` jobs."""
    client = redis.Redis.from_url(runtime.settings.redis_url)
    client.delete(keys.count, keys.stamps, keys.samples("lat"))
    send = (
        (lambda p: runtime.sender.send(NOOP, p))
        if laned
        else (lambda p: send_without_lane(runtime, p))
    )
    big, small = str(uuid.uuid4()), str(uuid.uuid4())
    # The burst is queued while the queue is paused (one producer sends slower than the fleet
    # drains), then the fleet drains it; B sends once the draining has begun.
    pauses.pause(runtime, NOOP.queue, by="bench", reason="fairness burst", known=[NOOP.queue])
    for _ in range(burst):
        send({"org_id": big, "entity_id": str(uuid.uuid4()), "sent_at": time.time(),
              "tag": "drain", "total": burst})  # fmt: skip
    pauses.resume(runtime, NOOP.queue, by="bench", known=[NOOP.queue])
    while int(client.get(keys.count) or 0) < burst // 20:
        time.sleep(0.005)
    send({"org_id": small, "entity_id": str(uuid.uuid4()), "sent_at": time.time(), "tag": "lat"})
    deadline = time.monotonic() + 120
    while not client.llen(keys.samples("lat")) or int(client.get(keys.count) or 0) < burst:
        if time.monotonic() > deadline:
            raise RuntimeError("the round did not drain within 120 s")
        time.sleep(0.01)
    latency = float(client.lindex(keys.samples("lat"), 0) or 0) * 1000
    client.close()
    return latency


def run(args: argparse.Namespace) -> dict[str, Any]:
    base = get_settings()
    results: dict[str, list[float]] = {"before": [], "after": []}
    with (
        tempfile.TemporaryDirectory(prefix="jobfleet-fair-") as tmp,
        private_redis(Path(tmp)) as redis_url,
    ):
        sandbox = Sandbox(Settings(redis_url=redis_url, database_url=base.database_url))
        sandbox.create()
        try:
            group = WorkerGroup(
                sandbox, "bench.apps.fleet", processes=args.processes, threads=args.threads,
                worker_timeout_ms=base.worker_idle_timeout_ms, log_path=Path(tmp) / "workers.log",
            )  # fmt: skip
            with group:
                runtime = Runtime(sandbox.settings)
                keys = Keys(sandbox.namespace, "fleet")
                try:
                    for _ in range(args.rounds):
                        for mode in ("before", "after"):
                            ms = one_round(runtime, keys, args.burst, laned=mode == "after")
                            results[mode].append(ms)
                            print(f"  {mode}: small org's job started {ms:.1f} ms after its send",
                                  file=sys.stderr)  # fmt: skip
                finally:
                    runtime.close()
        finally:
            sandbox.destroy()
    return {
        "processes": args.processes,
        "threads": args.threads,
        "burst": args.burst,
        "rounds": args.rounds,
        "small_org_start_ms": {m: round(statistics.median(v), 1) for m, v in results.items()},
        "samples_ms": {m: [round(x, 1) for x in v] for m, v in results.items()},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--burst", type=int, default=2_000, help="the large org's jobs per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        s = result["small_org_start_ms"]
        print(
            f"small org's start latency behind a {args.burst}-job burst of another org "
            f"({args.processes} processes x {args.threads} threads), median of {args.rounds}: "
            f"before {s['before']} ms, after {s['after']} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
