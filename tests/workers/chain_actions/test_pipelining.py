"""Several transactions of one signer in flight at once: the signer lock orders nonces only, so
eight mints by the operator go into one block instead of eight."""

from __future__ import annotations

from typing import Any

import pytest

from chain import devnet
from shared.runtime import Runtime
from tests.support.chain.fixtures import Workers
from tests.support.chain.world import World
from tests.support.wait import wait_for

from .test_worker import finished, mint

pytestmark = pytest.mark.slow


def test_one_signers_transactions_are_pipelined_into_one_block(
    world: World, workers: Workers, runtime: Runtime, db: Any
) -> None:
    operator = world.operator.address
    start = world.nonce(operator)
    players = ["0x" + f"{i:02x}" * 20 for i in range(20, 28)]
    devnet.set_automine(world.client, False)
    workers.start(threads=8)
    jobs = [mint(world, 9, p) for p in players]

    def in_flight() -> list[int] | None:
        nonces = sorted(
            r[0]
            for r in db.execute(
                "SELECT nonce FROM chain_actions WHERE job_id = ANY(%s) AND status = 'SENT'",
                (jobs,),
            )
        )
        return nonces if len(nonces) == len(jobs) else None

    nonces = wait_for(in_flight, timeout=30, what="eight mints in flight at once")
    assert nonces == list(range(start, start + len(jobs)))  # one signer, no gap, no reuse
    devnet.mine(world.client)  # one block for all of them
    views = finished(runtime, jobs)
    assert {(v.status, v.result["outcome"]) for v in views} == {("COMPLETED", "confirmed")}
    assert {v.result["block_number"] for v in views} == {world.client.block_number()}
    assert world.nonce(operator) == start + len(jobs)
    assert all(world.has_badge(p, 9) for p in players)
