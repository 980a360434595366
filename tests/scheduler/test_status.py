"""`fleet chain status` as an operator runs it: cursor, head, lag, last keeper action, lock holder;
the scheduler's section of `fleet status` (`scheduler.status`), read from a `/metrics` page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chain import devnet
from scheduler.chain import jobs as chain
from scheduler.chain.indexer import sync_once
from scheduler.chain.keeper import run_once
from scheduler.status import scheduler_runs
from shared.config import Settings
from shared.runtime import Runtime
from tests.support.chain.fixtures import chain_env
from tests.support.chain.world import World

from .conftest import now, scheduler_overrides

FLEET = str(Path(sys.executable).with_name("fleet"))

METRICS = """\
# HELP jobfleet_scheduler_runs_total Periodic job runs by job and outcome
# TYPE jobfleet_scheduler_runs_total counter
jobfleet_scheduler_runs_total{job="outbox-relay",outcome="ok"} 41.0
jobfleet_scheduler_runs_total{job="lottery-keeper",outcome="ok"} 3.0
jobfleet_scheduler_runs_total{job="lottery-keeper",outcome="error"} 2.0
# HELP jobfleet_indexer_lag_blocks Blocks between the head and the indexer cursor
# TYPE jobfleet_indexer_lag_blocks gauge
jobfleet_indexer_lag_blocks 4.0
"""


def status(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [FLEET, "chain", "status", "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_scheduler_runs_are_counted_by_job_and_outcome_from_metrics() -> None:
    assert scheduler_runs(METRICS) == {
        "outbox-relay": {"ok": 41},
        "lottery-keeper": {"ok": 3, "error": 2},
    }
    assert "error" in scheduler_runs(None)


@pytest.mark.slow
def test_chain_status_shows_cursor_lag_last_keeper_action_and_lock_holder(
    world: World,
    anvil: devnet.Anvil,
    settings: Settings,
    sched_runtime: Runtime,
    jobs: chain.ChainJobs,
) -> None:
    env = chain_env(anvil, **scheduler_overrides(settings))
    assert status(env)["indexer_cursor"] is None
    round_id = world.current_round()
    world.buy(world.accounts[1])
    world.buy(world.accounts[2])
    world.end_round()
    drawn = run_once(jobs.keeper, now())
    synced = sync_once(jobs.client, sched_runtime.sessions, jobs.indexer, cancel=lambda j: "")
    devnet.mine(world.client, 4)
    # Long enough for the `fleet` process to start on a loaded machine.
    jobs.keeper.redis.set(jobs.keeper.lock_key, "host-a:42:0badc0de", px=60_000)

    shown = status(env)
    assert shown["indexer_cursor"] == synced.cursor
    assert shown["block"] == world.client.block_number()
    assert shown["indexer_lag_blocks"] == 4
    assert str(shown["keeper_last_action"]).startswith(
        f"draw_requested round={round_id} tx={drawn.tx_hash}"
    )
    assert shown["keeper_lock_holder"] == "host-a:42:0badc0de"


@pytest.mark.slow
def test_chain_status_flags_a_cursor_ahead_of_the_chain_head(
    world: World, anvil: devnet.Anvil, settings: Settings, db: Any
) -> None:
    head = world.client.block_number()
    db.execute(
        "INSERT INTO chain_cursor (name, chain_id, block_number) VALUES ('lottery', %s, %s)",
        (anvil.chain_id, head + 50),
    )
    shown = status(chain_env(anvil, **scheduler_overrides(settings)))
    assert shown["indexer_cursor"] == head + 50
    assert shown["indexer_lag_blocks"] is None
    assert "ahead of the chain head" in str(shown["indexer_warning"])
