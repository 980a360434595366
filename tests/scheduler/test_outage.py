"""A `python -m scheduler` whose EVM node goes away and comes back: the outage is logged when it
begins, every `SCHEDULER_OUTAGE_LOG_EVERY_S` while it lasts and when it ends, per chain job;
not a `scheduler.job_failed` traceback per pass and a `keeper.failed` per keeper pass (a
300 s outage wrote 101 and 30 of them)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from chain import devnet
from tests.support.chain.world import World
from tests.support.proxy import Proxy
from tests.support.wait import wait_for

from .conftest import Schedulers

pytestmark = pytest.mark.slow

DOWN_S = 4.5
EVERY_S = 1.5


def events(schedulers: Schedulers) -> list[dict[str, Any]]:
    out = []
    for line in schedulers.logs().splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def named(schedulers: Schedulers, event: str) -> list[dict[str, Any]]:
    return [e for e in events(schedulers) if e.get("event") == event]


def test_a_node_outage_is_logged_when_it_begins_every_interval_and_when_it_ends(
    world: World, schedulers: Schedulers, anvil: devnet.Anvil
) -> None:
    port = devnet.free_port()
    proxy = Proxy(port, ("127.0.0.1", int(anvil.url.rsplit(":", 1)[1])))
    proxy.up()
    try:
        schedulers.start(
            CHAIN_RPC_URL=f"http://127.0.0.1:{port}",
            SCHEDULER_OUTAGE_LOG_EVERY_S=str(EVERY_S),
        )
        wait_for(lambda: named(schedulers, "indexer.synced"), timeout=60, what="a first pass")
        proxy.down()
        time.sleep(DOWN_S)
        proxy.up()
        wait_for(
            lambda: (
                {e["job"] for e in named(schedulers, "scheduler.job_recovered")}
                >= {"chain-indexer", "lottery-keeper"}
            ),
            timeout=30,
            what="both chain jobs answered again",
        )
    finally:
        proxy.down()
    assert named(schedulers, "scheduler.job_failed") == []
    assert named(schedulers, "keeper.failed") == []
    for job in ("chain-indexer", "lottery-keeper"):
        lines = [e for e in named(schedulers, "scheduler.job_outage") if e["job"] == job]
        # One when it began, then at most one per interval (the indexer ran every 300 ms).
        assert 1 <= len(lines) <= 2 + DOWN_S / EVERY_S, lines
        assert lines[0]["outage"] == "began" and lines[0]["level"] == "warning"
        assert all("exception" not in e for e in lines)
        (recovered,) = [e for e in named(schedulers, "scheduler.job_recovered") if e["job"] == job]
        assert recovered["failures"] >= len(lines)
