"""A lottery round through the scheduler's jobs and the chain-actions worker, on anvil: the
keeper draws or closes, the indexer projects and stages the follow-ups, the relay publishes
them, a `dramatiq workers.chain_actions.app` process sends them; chain and tables then agree."""

from __future__ import annotations

from typing import Any

import pytest

from chain.abi import LOTTERY
from chain.address import to_checksum_address
from scheduler.chain import jobs as chain
from scheduler.chain.indexer import sync_once
from scheduler.chain.keeper import run_once
from shared.jobs import runs
from shared.observability.metrics import render
from shared.outbox import relay_once
from shared.runtime import Runtime
from tests.support.chain.fixtures import Workers
from tests.support.chain.world import TICKET, World
from tests.support.wait import wait_for

from .conftest import now

pytestmark = pytest.mark.slow


def index(rt: Runtime, jobs: chain.ChainJobs) -> Any:
    return sync_once(jobs.client, rt.sessions, jobs.indexer, cancel=lambda j: "n/a")


def all_completed(rt: Runtime, job_ids: list[str], timeout: float = 40) -> None:
    def probe() -> bool:
        views = [runs.find(j, org_id=None, runtime=rt) for j in job_ids]
        return all(v is not None and v.status == "COMPLETED" for v in views)

    wait_for(probe, timeout=timeout, interval=0.1, what=f"{len(job_ids)} chain actions")


def logs_named(world: World, event: str, round_id: int) -> int:
    from chain.abi import event_topic

    found = world.client.request(
        "eth_getLogs",
        [
            {
                "fromBlock": "0x0",
                "toBlock": "latest",
                "address": world.contracts[LOTTERY],
                "topics": [event_topic(LOTTERY, event), "0x" + format(round_id, "064x")],
            }
        ],
    )
    return len(found)


def test_a_full_round_is_drawn_projected_badged_and_paid(
    world: World, workers: Workers, sched_runtime: Runtime, jobs: chain.ChainJobs, db: Any
) -> None:
    a = world.accounts
    round_id = world.current_round()
    world.buy(a[1], 1)
    world.buy(a[2], 2)
    world.buy(a[1], 1)  # a second purchase: a second ticket row, still one badge
    world.end_round()

    kept = run_once(jobs.keeper, now())
    assert kept.outcome == "draw_requested" and kept.round_id == round_id

    synced = index(sched_runtime, jobs)
    assert synced.logs >= 5 and len(synced.actions) == 3  # two badges and the prize
    winner = to_checksum_address(world.lottery_call("getRound", round_id)[0][8])
    assert db.execute(
        "SELECT winner, prize_wei FROM lottery_winners WHERE round_id = %s", (round_id,)
    ).fetchall() == [(winner, 4 * TICKET)]
    tickets = db.execute(
        "SELECT player, sum(ticket_count) FROM lottery_tickets WHERE round_id = %s GROUP BY player",
        (round_id,),
    ).fetchall()
    assert dict(tickets) == {
        a[1].address: int(world.lottery_call("ticketsOf", round_id, a[1].address)[0]),
        a[2].address: int(world.lottery_call("ticketsOf", round_id, a[2].address)[0]),
    }
    assert db.execute(
        "SELECT status FROM lottery_rounds WHERE round_id = %s", (round_id,)
    ).fetchone() == ("COMPLETED",)

    assert relay_once(sched_runtime, now=now()).published == 3
    workers.start()
    all_completed(sched_runtime, synced.actions)
    index(sched_runtime, jobs)  # the badges minted by the worker are projected in turn

    assert world.lottery_call("getRound", round_id)[0][9] is True  # prizeClaimed
    for player in (a[1], a[2]):
        assert world.has_badge(player.address, round_id)
    assert sorted(
        r[0] for r in db.execute("SELECT player FROM badges WHERE round_id = %s", (round_id,))
    ) == sorted([a[1].address, a[2].address])
    assert db.execute(
        "SELECT count(*) FROM keeper_actions WHERE outcome = 'draw_requested'"
    ).fetchone() == (1,)

    exposed = render().decode()
    for name in (
        "jobfleet_indexer_lag_blocks",
        "jobfleet_indexer_blocks_total",
        "jobfleet_indexer_logs_total",
        "jobfleet_indexer_reorgs_total",
        'jobfleet_keeper_runs_total{outcome="draw_requested"}',
        "jobfleet_keeper_lock_held",
    ):
        assert name in exposed, name

    # Indexing again from scratch changes nothing: projections are keyed by (tx_hash, log_index).
    db.execute("UPDATE chain_cursor SET block_number = 0, block_hash = NULL")
    again = index(sched_runtime, jobs)
    assert again.logs == 0 and again.actions == []
    assert db.execute("SELECT count(*) FROM lottery_tickets").fetchone() == (3,)


def test_an_expired_round_is_cancelled_and_every_payer_refunded_once(
    world: World, workers: Workers, sched_runtime: Runtime, jobs: chain.ChainJobs, db: Any
) -> None:
    a = world.accounts
    round_id = world.current_round()
    world.buy(a[3], 2)
    world.buy(a[3], 1)  # one payer, two purchases: one refund
    world.end_round()
    assert run_once(jobs.keeper, now()).outcome == "round_closed"
    assert run_once(jobs.keeper, now()).outcome == "idle"  # the next round is open, not expired

    synced = index(sched_runtime, jobs)
    refunds = [j for j in synced.actions if j.startswith("CLAIM_REFUND")]
    scope = f"{jobs.indexer.chain_id}-{world.contracts[LOTTERY].lower()}"
    assert refunds == [f"CLAIM_REFUND-{scope}-{round_id}-{a[3].address.lower()}"]
    assert db.execute(
        "SELECT status FROM lottery_rounds WHERE round_id = %s", (round_id,)
    ).fetchone() == ("CANCELLED",)

    balance = world.client.balance(a[3].address)
    relay_once(sched_runtime, now=now())
    workers.start()
    all_completed(sched_runtime, synced.actions)
    assert world.lottery_call("paidBy", round_id, a[3].address)[0] == 0
    assert world.client.balance(a[3].address) > balance  # 3 tickets back, less the gas
    assert logs_named(world, "RefundClaimed", round_id) == 1
    # The cancellation indexed again stages nothing new.
    assert index(sched_runtime, jobs).actions == []
