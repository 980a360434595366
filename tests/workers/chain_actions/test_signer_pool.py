"""The operator's pool of signers on anvil: badge mints spread over several signers, each with
its own nonce lane and lock; each mint once, no nonce gap on any signer, and a worker SIGKILLed
mid-batch changes nothing of that."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from chain import devnet
from chain.abi import BADGE
from chain.deploy import add_signers
from chain.wallets import SIGNER, store_wallet
from shared.runtime import Runtime
from tests.support.chain.fixtures import Workers
from tests.support.chain.world import World, keyring
from tests.support.wait import wait_for

from .test_worker import finished, mint

pytestmark = pytest.mark.slow

MINTS = 24


def test_mints_spread_over_the_signer_pool_once_each_with_no_gap_through_a_sigkill(
    world: World, workers: Workers, runtime: Runtime, db: Any
) -> None:
    client = world.client
    signers = add_signers(client, world.operator, world.contracts[BADGE], 3, fund_wei=10**17)
    with runtime.pool.connection() as conn:
        for signer in signers:
            store_wallet(conn, keyring(), bytes(signer.key), kind=SIGNER)
    pool = [world.operator.address, *(s.address for s in signers)]
    start = {a: world.nonce(a) for a in pool}
    players = [world.accounts[1 + i % 6].address for i in range(MINTS)]
    devnet.set_automine(client, False)
    first = workers.start(threads=8)
    jobs = [mint(world, 100 + i, p) for i, p in enumerate(players)]

    def progress() -> int:
        devnet.mine(client)  # a block at a time, as a chain makes them
        return int(
            db.execute(
                "SELECT count(*) FROM chain_actions WHERE status = 'SENT' OR status = 'CONFIRMED'"
            ).fetchone()[0]
        )

    wait_for(lambda: progress() >= MINTS // 2, timeout=60, interval=0.3, what="half sent")
    os.killpg(first.pid, signal.SIGKILL)  # mid-batch: transactions in flight, others not sent
    first.wait()
    workers.start(threads=8)

    def done() -> bool:
        devnet.mine(client)
        return bool(
            db.execute(
                "SELECT count(*) = %s FROM job_runs WHERE job_id = ANY(%s) AND status = 'COMPLETED'",
                (MINTS, jobs),
            ).fetchone()[0]
        )

    wait_for(done, timeout=90, interval=0.3, what="every mint settled")
    devnet.set_automine(client, True)
    views = finished(runtime, jobs)
    assert {v.result["outcome"] for v in views} == {"confirmed"}
    used = dict(
        db.execute(
            "SELECT signer, count(*) FROM chain_actions WHERE status = 'CONFIRMED' GROUP BY 1"
        ).fetchall()
    )
    assert len(used) >= 3 and set(used) <= set(pool)  # spread over the pool's lanes
    for address in pool:  # one transaction per mint of that signer: no gap, no duplicate
        assert world.nonce(address) - start[address] == used.get(address, 0), address
    assert sum(used.values()) == MINTS
    for i, p in enumerate(players):
        assert world.badge_call("hasBadge", p, 100 + i)[0] is True
