"""The keeper on anvil with real Redis: Redis down, the lock held elsewhere, an expired holder
fenced off, a paused contract, and a pending draw transaction never doubled."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import redis

from chain import devnet
from chain.abi import LOTTERY, encode_call
from chain.lock import HeldLock, LockLost
from chain.transactions import TxPolicy, TxRequest, TxSender
from scheduler.chain import jobs as chain
from scheduler.chain.keeper import DRAW, _key, _send, run_once
from shared.runtime import Runtime
from tests.support.chain.world import World
from tests.support.wait import wait_for

from .conftest import now


def ready_round(world: World) -> int:
    round_id = world.current_round()
    world.buy(world.accounts[1])
    world.buy(world.accounts[2])
    world.end_round()
    assert world.lottery_call("isDrawReady")[0] is True
    return round_id


def test_with_redis_down_the_keeper_sends_nothing_then_draws_once_when_it_returns(
    world: World, jobs: chain.ChainJobs, db: Any
) -> None:
    ready_round(world)
    operator = world.operator.address
    sent_before = world.nonce(operator)
    down = redis.Redis(port=devnet.free_port(), socket_connect_timeout=0.5, socket_timeout=0.5)
    offline = dataclasses.replace(jobs.keeper, redis=down)

    assert run_once(offline, now()).outcome == "redis_down"
    assert world.nonce(operator) == sent_before and world.lottery_call("isDrawReady")[0]

    assert run_once(jobs.keeper, now()).outcome == "draw_requested"
    assert run_once(jobs.keeper, now()).outcome == "idle"
    assert world.nonce(operator) == sent_before + 1
    assert db.execute("SELECT outcome FROM keeper_actions ORDER BY id").fetchall() == [
        ("redis_down",),
        ("draw_requested",),
    ]


def test_a_keeper_whose_lock_is_held_elsewhere_or_expired_sends_nothing(
    world: World, jobs: chain.ChainJobs
) -> None:
    round_id = ready_round(world)
    keeper = jobs.keeper
    operator = world.operator.address
    sent_before = world.nonce(operator)
    keeper.redis.set(keeper.lock_key, "other-host:1:feedface", px=5_000)
    assert run_once(keeper, now()).outcome == "not_leader"

    # A holder that stalled past its TTL: its lock expired and another replica took it.
    stale = HeldLock(keeper.redis, keeper.lock_key, "stalled:2:cafebabe", 5_000, lambda: 0.0)
    try:
        _send(keeper, stale, DRAW, round_id, _key(keeper, DRAW, round_id))
        raise AssertionError("an expired holder went past the fencing check")
    except LockLost:
        pass
    assert world.nonce(operator) == sent_before
    assert keeper.redis.get(keeper.lock_key) == b"other-host:1:feedface"  # not released by it


def test_a_paused_lottery_gets_no_transaction(world: World, jobs: chain.ChainJobs) -> None:
    ready_round(world)
    lottery = world.contracts[LOTTERY]
    devnet.transact(world.client, world.operator, lottery, encode_call(LOTTERY, "pause"))
    sent_before = world.nonce(world.operator.address)
    assert run_once(jobs.keeper, now()).outcome == "paused"
    assert world.nonce(world.operator.address) == sent_before


def test_while_a_draw_is_pending_no_second_transaction_is_sent(
    world: World, jobs: chain.ChainJobs, sched_runtime: Runtime, db: Any
) -> None:
    round_id = ready_round(world)
    operator = world.operator.address
    keeper = jobs.keeper
    quick = TxSender(
        keeper.sender.client,
        keeper.sender.locks,
        keeper.sender.journal,
        TxPolicy(receipt_timeout_s=0.5, replace_after_s=60),
    )
    impatient = dataclasses.replace(keeper, sender=quick)
    devnet.set_automine(world.client, False)

    first = run_once(impatient, now())
    assert first.outcome == "error" and "TxNotMined" in (first.error or "")
    second = run_once(impatient, now())  # still pending: settled, not sent again
    assert second.outcome == "error"
    assert world.client.nonce(operator, "pending") == world.nonce(operator) + 1  # one in the pool

    devnet.mine(world.client, 1)
    settled = run_once(impatient, now())
    assert settled.outcome == "draw_requested" and settled.round_id == round_id
    row = db.execute(
        "SELECT status, jsonb_array_length(tx_hashes), tx_hash FROM chain_actions WHERE job_id = %s",
        (_key(keeper, DRAW, round_id),),
    ).fetchone()
    assert row == ("CONFIRMED", 1, settled.tx_hash)
    assert world.lottery_call("getRound", round_id)[0][0] == 3  # Completed


def test_a_late_second_keeper_never_turns_a_confirmed_row_back(
    world: World, jobs: chain.ChainJobs
) -> None:
    """A second keeper (or a redelivery) read the journal row before the first settled it: under
    the signer lock it finds the row CONFIRMED and sends nothing; a FAILED written after a
    failing preflight cannot overwrite it either."""
    keeper = jobs.keeper
    round_id = ready_round(world)
    key = _key(keeper, DRAW, round_id)
    late = keeper.journal.begin(key, type=DRAW, round_id=round_id, address=keeper.lottery)
    assert late.status == "PENDING"

    assert run_once(keeper, now()).outcome == "draw_requested"
    sent = world.nonce(world.operator.address)
    request = TxRequest(key, keeper.lottery, encode_call(LOTTERY, "requestDraw"))
    outcome = keeper.sender.execute(world.operator, request)  # its preflight would revert now
    assert outcome.recorded == "CONFIRMED" and outcome.revert is None
    assert world.nonce(world.operator.address) == sent
    keeper.journal.finish(key, "FAILED", error_code="RoundNotOpen", error="a late preflight")
    row = keeper.journal.get(key)
    assert row is not None and (row.status, row.error_code) == ("CONFIRMED", None)


def test_two_keepers_on_split_locks_record_one_draw_in_the_audit_table(
    world: World, jobs: chain.ChainJobs, db: Any
) -> None:
    """Two schedulers whose keeper locks differ (split locks): the second finds the first's
    draw journaled SENT and awaits the same transaction. The chain and the journal hold one
    transaction; before, `keeper_actions` said `draw_requested` twice for the round."""
    import threading

    round_id = ready_round(world)
    operator = world.operator.address
    sent_before = world.nonce(operator)
    first = jobs.keeper
    second = dataclasses.replace(first, lock_key=first.lock_key + ":other")
    devnet.set_automine(world.client, False)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda k=k: results.append(run_once(k, now())))
               for k in (first, second)]  # fmt: skip
    threads[0].start()
    wait_for(lambda: world.client.nonce(operator, "pending") == sent_before + 1, what="the draw")
    threads[1].start()
    time.sleep(1.0)  # the second keeper is awaiting the first's transaction
    devnet.mine(world.client, 1)
    for t in threads:
        t.join(timeout=20)
    assert sorted(r.outcome for r in results) == ["already_done", "draw_requested"]
    assert world.nonce(operator) == sent_before + 1
    assert db.execute(
        "SELECT outcome, round_id, count(*) FROM keeper_actions GROUP BY 1, 2 ORDER BY 1"
    ).fetchall() == [("already_done", round_id, 1), ("draw_requested", round_id, 1)]
