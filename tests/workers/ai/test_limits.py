"""Per-org limits shared by two `dramatiq workers.ai.app` processes through Redis."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.env import test_env
from tests.support.procs import WorkerProcess
from tests.support.wait import wait_for
from tests.workers.ai.conftest import send_task
from tests.workers.ai.fake_openai import FakeOpenAI

RATE_ORG, FREE_ORG, CAPPED_ORG = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
WINDOW_MS = 2_000
TOKEN_CAP = 300


@pytest.fixture
def two_workers(runtime, fake_ai: FakeOpenAI, tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    env = {
        **os.environ,
        **test_env(),
        "AI_BASE_URL": fake_ai.url,
        "AI_MODEL": "gpt-4o-mini",
        "AI_MAX_OUTPUT_TOKENS": "40",
        "AI_REQUESTS_PER_MINUTE": "1000",
        "AI_RATE_WINDOW_MS": str(WINDOW_MS),
        "AI_ORG_LIMITS": json.dumps(
            {
                str(RATE_ORG): {"requests_per_minute": 2},
                str(CAPPED_ORG): {"tokens_per_day": TOKEN_CAP},
            }
        ),
        "RETRIES": json.dumps(
            {"ai": {"max_attempts": 2, "min_backoff_ms": 300, "max_backoff_ms": 600}}
        ),
        "PYTHONUNBUFFERED": "1",
        "dramatiq_worker_timeout": "50",
    }
    argv = [
        sys.executable,
        "-m",
        "dramatiq",
        "workers.ai.app",
        "--processes",
        "1",
        "--threads",
        "2",
        "--skip-logging",
    ]
    workers = [WorkerProcess(argv, env=env, log_path=tmp_path / f"ai{i}.log") for i in range(2)]
    try:
        for worker in workers:
            worker.wait_ready(timeout=60)
        yield workers
    finally:
        for worker in workers:
            worker.close()


def _statuses(db, job_ids: list[str]) -> dict[str, str]:  # type: ignore[no-untyped-def]
    rows = db.execute(
        "SELECT job_id, status FROM job_runs WHERE job_id = ANY(%s)", (job_ids,)
    ).fetchall()
    return dict(rows)


@pytest.mark.timing  # a time bound: make test runs it in the timing lane
@pytest.mark.slow
def test_two_workers_share_each_orgs_request_rate_and_daily_tokens(
    two_workers, fake_ai, db, runtime
) -> None:
    t0 = time.time()
    rated = [
        send_task("summarize", f"[case:rate] text {i}", org=RATE_ORG)[1].job_id for i in range(6)
    ]
    free = [
        send_task("summarize", f"[case:free] text {i}", org=FREE_ORG)[1].job_id for i in range(2)
    ]
    capped = [
        send_task("summarize", f"[case:cap] text {i}", org=CAPPED_ORG)[1].job_id for i in range(8)
    ]
    every = rated + free + capped

    def settled() -> bool:
        statuses = _statuses(db, every)
        return len(statuses) == len(every) and all(
            s in ("COMPLETED", "DEAD") for s in statuses.values()
        )

    wait_for(settled, timeout=45, interval=0.2, what="every job finished")

    # Requests per window: never more than 2 for the rated org in any 2 s, across both processes;
    # each delayed job ran on its first attempt (a delay is not a failure).
    times = sorted(r.at for r in fake_ai.calls("rate"))
    assert len(times) == 6
    worst = max(
        sum(1 for t in times if start <= t < start + WINDOW_MS / 1000 - 0.1) for start in times
    )
    assert worst <= 2, times
    assert times[-1] - times[0] >= 2 * WINDOW_MS / 1000 - 0.2
    runs = db.execute(
        "SELECT status, attempt FROM job_runs WHERE job_id = ANY(%s)", (rated,)
    ).fetchall()
    assert runs == [("COMPLETED", 1)] * 6
    # Another org is not slowed down by it
    assert all(r.at - t0 < 1.5 for r in fake_ai.calls("free"))
    # Both processes served requests: the limit held although it was enforced in two of them
    served = [sum(1 for e in w.json_lines() if e.get("event") == "ai.call") for w in two_workers]
    assert all(n > 0 for n in served), served

    # Tokens per day: the capped org stops at its cap; the rest fail QUOTA_EXCEEDED, at once
    statuses = _statuses(db, capped)
    dead = db.execute(
        "SELECT error_code, attempt FROM job_runs WHERE job_id = ANY(%s) AND status = 'DEAD'",
        (capped,),
    ).fetchall()
    assert dead and set(dead) == {("QUOTA_EXCEEDED", 1)}
    assert list(statuses.values()).count("COMPLETED") >= 1
    (used,) = db.execute(
        "SELECT SUM(tokens_in + tokens_out) FROM ai_usage WHERE org_id = %s", (CAPPED_ORG,)
    ).fetchone()
    assert 0 < used <= TOKEN_CAP
    counter = runtime.broker.client.keys(
        f"{runtime.settings.broker_namespace}:ai:tokens:{CAPPED_ORG}:*"
    )
    assert [int(runtime.broker.client.get(k)) for k in counter] == [used]  # reservations settled
