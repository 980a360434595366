"""`python -m scheduler` processes on anvil: two replicas at once (one draw per round, no
duplicate projection or action), and a replica SIGKILLed mid-catch-up (no gap, no duplicate)."""

from __future__ import annotations

from typing import Any

import pytest

from chain import devnet
from chain.abi import LOTTERY, event_topic
from tests.support.chain.world import World
from tests.support.wait import wait_for

from .conftest import Schedulers

pytestmark = pytest.mark.slow


def chain_logs(world: World, event: str) -> list[dict[str, Any]]:
    return list(
        world.client.request(
            "eth_getLogs",
            [
                {
                    "fromBlock": "0x0",
                    "toBlock": "latest",
                    "address": world.contracts[LOTTERY],
                    "topics": [event_topic(LOTTERY, event)],
                }
            ],
        )
    )


def no_duplicates(db: Any) -> None:
    for table in ("lottery_tickets", "lottery_winners", "lottery_rounds", "indexed_actions"):
        assert db.execute(
            f"SELECT count(*) FROM (SELECT tx_hash, log_index FROM {table}"
            " GROUP BY 1, 2 HAVING count(*) > 1) d"
        ).fetchone() == (0,), table
    assert db.execute(
        "SELECT count(*) FROM (SELECT job_id FROM outbox_events WHERE status <> 'FAILED'"
        " GROUP BY 1 HAVING count(*) > 1) d"
    ).fetchone() == (0,)


def test_two_schedulers_draw_each_round_once_and_project_each_log_once(
    world: World, schedulers: Schedulers, db: Any
) -> None:
    a = world.accounts
    operator = world.operator.address
    sent_before = world.nonce(operator)
    schedulers.start()
    schedulers.start()
    rounds = []
    for players in ((a[1], a[2]), (a[3], a[4], a[5])):
        round_id = world.current_round()
        rounds.append(round_id)
        for p in players:
            world.buy(p)
        world.end_round()
        wait_for(
            lambda r=round_id: db.execute(  # type: ignore[misc]
                "SELECT 1 FROM lottery_winners WHERE round_id = %s", (r,)
            ).fetchone(),
            timeout=30,
            what=f"round {round_id} drawn and indexed",
        )
    drawn = [int(log["topics"][1], 16) for log in chain_logs(world, "DrawRequested")]
    assert drawn == rounds
    assert world.nonce(operator) == sent_before + 2  # two draws, nothing else from the keeper
    assert db.execute(
        "SELECT count(*), count(DISTINCT job_id) FROM chain_actions WHERE type = 'KEEPER_DRAW'"
    ).fetchone() == (2, 2)
    wait_for(
        lambda: db.execute("SELECT count(*) FROM lottery_tickets").fetchone() == (5,),
        what="five tickets",
    )
    no_duplicates(db)
    assert db.execute(
        "SELECT count(*) FROM outbox_events WHERE job_name = 'chain:mint_badge'"
    ).fetchone() == (5,)
    logs = schedulers.logs()
    assert "keeper.draw_requested" in logs and "indexer.synced" in logs


def test_a_scheduler_killed_mid_catch_up_restarts_without_gap_or_duplicate(
    world: World, schedulers: Schedulers, db: Any
) -> None:
    a = world.accounts
    purchases = 0
    for i in range(12):  # purchases spread over ~1,200 blocks
        world.buy(a[1 + i % 5])
        purchases += 1
        devnet.mine(world.client, 100)
    head = world.client.block_number()
    slow = {"INDEXER_WINDOW_BLOCKS": "20", "KEEPER_INTERVAL_MS": "600000"}
    first = schedulers.start(**slow)

    def cursor() -> int:
        row = db.execute("SELECT block_number FROM chain_cursor").fetchone()
        return int(row[0]) if row else 0

    wait_for(lambda: cursor() > 200, timeout=30, interval=0.02, what="the indexer under way")
    schedulers.kill(first)
    killed_at = cursor()
    assert killed_at < head  # killed mid catch-up
    schedulers.start(**slow)
    wait_for(lambda: cursor() >= head, timeout=60, what="the restarted indexer caught up")

    on_chain = {
        (log["transactionHash"], int(log["logIndex"], 16))
        for log in chain_logs(world, "TicketsPurchased")
    }
    indexed = {(r[0], r[1]) for r in db.execute("SELECT tx_hash, log_index FROM lottery_tickets")}
    assert indexed == on_chain and len(on_chain) == purchases
    no_duplicates(db)
    assert db.execute(
        "SELECT count(*) FROM outbox_events WHERE job_name = 'chain:mint_badge'"
    ).fetchone() == (5,)  # one per (round, player)
