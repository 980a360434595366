"""An idle worker process costs at most ~10 Redis commands per second (DESIGN §9), and still
starts a job at once: sent, retried, or coming due from the delay queue.

Before: its consumers polled every 50 ms and the heartbeat thread ran the full queue
maintenance for every queue every second: ~90 commands per second per idle process (940/s for
an idle `make run` fleet, 1.9 MiB of AOF per minute). bench/idle_cost.py prints the figure.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import redis

from shared.config import Settings
from shared.runtime import Runtime
from tests.support.jobs import ECHO
from tests.support.procs import Procs
from tests.support.wait import wait_for, wait_run

BUDGET_PER_S = 10.0
#: The production heartbeat period (the tests' own is shorter).
PRODUCTION = {"HEARTBEAT_INTERVAL_MS": "1000", "HEARTBEAT_TIMEOUT_MS": "5000"}


def _calls(client: redis.Redis) -> dict[str, int]:
    info: dict[str, Any] = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_an_idle_worker_process_costs_at_most_10_redis_commands_per_second_and_wakes_at_once(
    runtime: Runtime, settings: Settings, procs: Procs
) -> None:
    server = procs.redis()  # a private Redis: its counters are this worker's alone
    worker = procs.worker(env={"REDIS_URL": server.url, **PRODUCTION})
    client = redis.Redis.from_url(server.url)
    producer = Runtime(settings.model_copy(update={"redis_url": server.url}))
    try:
        org = str(uuid.uuid4())
        warm = producer.sender.send(
            ECHO, {"org_id": org, "entity_id": str(uuid.uuid4()), "message": "w"}
        )
        wait_run(warm.job_id, "COMPLETED")
        time.sleep(1.0)  # idle from here on
        client.config_resetstat()
        window = 6.0
        time.sleep(window)
        calls = _calls(client)
        for ours in ("config|resetstat", "config", "info"):
            calls.pop(ours, None)
        rate = sum(calls.values()) / window
        assert rate <= BUDGET_PER_S, f"{rate:.1f} commands/s idle: {calls}"

        # Still woken at once after a long idle spell (not at the end of its wait).
        started = time.monotonic()
        sent = producer.sender.send(
            ECHO, {"org_id": org, "entity_id": str(uuid.uuid4()), "message": "hi"}
        )
        wait_run(sent.job_id, "COMPLETED", timeout=5)
        assert time.monotonic() - started < 1.0

        # A failing job: its two retries come due from the delay queue (100 ms, 200 ms back-off)
        # and are moved back by the broker's own enqueue, which wakes the idle consumer too.
        time.sleep(3.0)
        started = time.monotonic()
        boom = producer.sender.send(
            ECHO, {"org_id": org, "entity_id": str(uuid.uuid4()), "message": "boom"}
        )
        wait_run(boom.job_id, "DEAD", timeout=10)
        assert time.monotonic() - started < 2.0, "a retry waited for an idle consumer's timeout"
        assert wait_for(lambda: worker.alive(), what="the worker still up")
    finally:
        producer.close()
        client.close()
