"""Finality on anvil: an action settles only once its block is INDEXER_CONFIRMATIONS deep (a
transaction a reorg takes out before is sent again, once); a cancel that arrives before the
broadcast stops the action. (A journal row never going back from CONFIRMED: test_keeper.py.)"""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from chain import devnet
from chain.abi import BADGE
from chain.lock import signer_lock_prefix
from shared.jobs import runs
from shared.runtime import Runtime
from tests.support.chain.fixtures import Workers
from tests.support.chain.world import World
from tests.support.wait import wait_for

from .test_worker import finished, mint

# Confirmation windows of a block a second: make test runs these in its timing lane.
pytestmark = [pytest.mark.slow, pytest.mark.timing]


def test_a_transaction_reorged_out_before_its_confirmations_is_sent_again_once(
    world: World, workers: Workers, runtime: Runtime, db: Any
) -> None:
    player, operator = world.accounts[4].address, world.operator.address
    start = world.nonce(operator)
    workers.start(INDEXER_CONFIRMATIONS="2")
    job = mint(world, 3, player)

    def mined() -> int | None:
        row = db.execute(
            "SELECT tx_hash FROM chain_actions WHERE job_id = %s AND status = 'SENT'", (job,)
        ).fetchone()
        receipt = world.client.receipt(row[0]) if row and row[0] else None
        return int(receipt["blockNumber"], 16) if receipt else None

    block = wait_for(mined, timeout=20, what="the mint mined, not yet confirmed")
    assert world.has_badge(player, 3)
    run = runs.find(job, org_id=None, runtime=runtime)
    # One block deep: not settled (awaited, or handed back to look again: AWAITING_RECEIPT).
    assert run is not None and run.status in ("RUNNING", "QUEUED")
    # The mint's block is replaced by an empty one: the mint is no longer on chain.
    world.client.request("anvil_reorg", [world.client.block_number() - block + 1, []])
    assert not world.has_badge(player, 3)

    def settled() -> bool:
        view = runs.find(job, org_id=None, runtime=runtime)
        if view is not None and view.status in ("COMPLETED", "DEAD"):
            return True
        devnet.mine(world.client)  # blocks keep coming, as on a real chain
        return False

    wait_for(settled, timeout=30, interval=0.3, what="the action settled")
    (view,) = finished(runtime, [job])
    assert view.status == "COMPLETED" and view.result["outcome"] == "confirmed"
    assert world.has_badge(player, 3) and world.badge_call("balanceOf", player)[0] == 1
    assert world.nonce(operator) == start + 1  # sent again with the same nonce: one transaction
    receipt = world.client.receipt(view.result["tx_hash"])
    assert world.client.block_number() - int(receipt["blockNumber"], 16) >= 2


def test_a_cancel_arriving_before_the_broadcast_stops_the_action(
    world: World, workers: Workers, runtime: Runtime, db: Any
) -> None:
    import redis

    player, operator = world.accounts[5].address, world.operator.address
    start = world.nonce(operator)
    settings = runtime.settings
    lock = f"{signer_lock_prefix(settings.broker_namespace)}:{world.client.chain_id()}:"
    lock += operator.lower()
    client = redis.Redis.from_url(settings.redis_url)
    client.set(lock, secrets.token_hex(8), px=20_000)  # the operator is busy elsewhere
    workers.start()
    job = mint(world, 5, player)
    wait_for(
        lambda: (v := runs.find(job, org_id=None, runtime=runtime)) and v.status == "RUNNING",
        timeout=20,
        what="the action waiting for its signer",
    )
    assert runs.cancel(job, org_id=None, runtime=runtime) == "CANCEL_REQUESTED"
    client.delete(lock)

    def canceled() -> Any:
        view = runs.find(job, org_id=None, runtime=runtime)
        return view if view is not None and view.status not in ("QUEUED", "RUNNING") else None

    view = wait_for(canceled, timeout=20, what="the action stopped")
    assert view.status == "CANCELED"
    assert world.nonce(operator) == start and not world.has_badge(player, 5)
    assert db.execute(
        "SELECT status, tx_hash FROM chain_actions WHERE job_id = %s", (job,)
    ).fetchone() == ("PENDING", None)
    assert world.contracts[BADGE]  # the badge contract was never called
