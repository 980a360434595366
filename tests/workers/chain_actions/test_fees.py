"""Fees that follow the market, on anvil: a 100x base-fee spike while mints are pending (some
dropped by the node, as a node does with transactions it can no longer include) costs no
attempt; each pending transaction is re-priced from the node's next base fee and mined once."""

from __future__ import annotations

from typing import Any

import pytest

from chain import devnet
from shared.jobs import runs
from shared.runtime import Runtime
from tests.support.chain.fixtures import Workers
from tests.support.chain.world import World
from tests.support.wait import wait_for

from .test_worker import finished, mint

pytestmark = pytest.mark.slow

SPIKE = 100


def test_a_100x_base_fee_spike_with_pending_transactions_spends_no_attempt(
    world: World, workers: Workers, runtime: Runtime, db: Any
) -> None:
    client = world.client
    players = [world.accounts[i].address for i in range(1, 7)]
    operator = world.operator.address
    start = world.nonce(operator)
    devnet.set_automine(client, False)
    # Replacement by age alone would take 60 s: what re-prices here is the market.
    workers.start(threads=8, CHAIN_REPLACE_AFTER_S="60")
    jobs = [mint(world, 3, p) for p in players]
    wait_for(
        lambda: client.nonce(operator, "pending") == start + len(players),
        timeout=40,
        what="every mint broadcast and pending",
    )
    base = client.base_fee()
    sent = [r[0] for r in db.execute("SELECT tx_hash FROM chain_actions ORDER BY nonce")]
    for tx_hash in sent[::2]:  # the node drops half of them
        devnet.drop_transaction(client, tx_hash)

    def settled() -> bool:
        views = [runs.find(j, org_id=None, runtime=runtime) for j in jobs]
        if all(v is not None and v.status in ("COMPLETED", "DEAD") for v in views):
            return True
        client.request("anvil_setNextBlockBaseFeePerGas", [hex(base * SPIKE)])  # it lasts
        devnet.mine(client)
        return False

    try:
        wait_for(settled, timeout=60, interval=0.5, what="every mint settled through the spike")
    finally:  # the node keeps a next base fee across snapshots: the next test's is normal
        client.request("anvil_setNextBlockBaseFeePerGas", [hex(base)])
        devnet.mine(client)
    views = finished(runtime, jobs)
    assert [(v.status, v.result["outcome"]) for v in views] == [("COMPLETED", "confirmed")] * 6
    assert [v.attempt for v in views] == [1] * 6  # the spike spent no attempt
    assert world.nonce(operator) == start + len(players)  # each mint once, no gap
    assert all(world.badge_call("balanceOf", p)[0] == 1 for p in players)
    logs = workers.logs()
    assert "RPC_ERROR" not in logs
    # Put back (anvil evicts what the base fee priced out), refused for its fees, re-priced.
    assert logs.count('"event": "tx.repriced"') >= len(players)
