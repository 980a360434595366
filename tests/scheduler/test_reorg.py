"""A reorg across indexed blocks (`anvil_reorg`): projections rewound to the fork point and
rebuilt from the new chain; follow-up actions only orphaned logs asked for are cancelled —
dropped from the outbox when unpublished, their run cancelled when published but not run."""

from __future__ import annotations

from typing import Any

import pytest

from chain import devnet
from chain.abi import LOTTERY, encode_call
from chain.fees import GWEI, initial_fees
from scheduler.chain import jobs as chain
from scheduler.chain.indexer import sync_once
from shared.jobs import runs
from shared.outbox import relay_once
from shared.runtime import Runtime
from tests.support.chain.world import TICKET, World
from tests.support.wait import wait_for

from .conftest import Workers, now


def signed_purchase(world: World, account: Any, count: int) -> str:
    client = world.client
    fees = initial_fees(client.base_fee(), priority_fee=GWEI, cap=1_000 * GWEI)
    tx = {
        "type": 2,
        "chainId": client.chain_id(),
        "nonce": client.nonce(account.address, "latest"),
        "to": world.contracts[LOTTERY],
        "data": encode_call(LOTTERY, "buyTickets", count),
        "value": count * TICKET,
        "gas": 200_000,
        **fees.as_tx_fields(),
    }
    return "0x" + bytes(account.sign_transaction(tx).raw_transaction).hex()


def test_a_reorg_rewinds_projections_and_cancels_the_orphaned_actions(
    world: World, sched_runtime: Runtime, jobs: chain.ChainJobs, db: Any
) -> None:
    a = world.accounts
    round_id = world.current_round()
    cancel_outcomes: dict[str, str] = {}

    def cancel(job_id: str) -> str:
        cancel_outcomes[job_id] = runs.cancel(job_id, org_id=None, runtime=sched_runtime)
        return cancel_outcomes[job_id]

    def index() -> Any:
        return sync_once(jobs.client, sched_runtime.sessions, jobs.indexer, cancel=cancel)

    world.buy(a[1], 1)
    first = index()
    relay_once(sched_runtime, now=now())  # a[1]'s badge job is published (no worker runs it)
    wait_for(
        lambda: runs.find(first.actions[0], org_id=None, runtime=sched_runtime),
        what="the published run",
    )
    world.buy(a[2], 1)
    second = index()  # a[2]'s badge job stays in the outbox
    assert db.execute("SELECT count(*) FROM lottery_tickets").fetchone() == (2,)
    replacement = signed_purchase(world, a[3], 2)

    # The two purchase blocks are replaced by one block holding a[3]'s purchase instead.
    world.client.request("anvil_reorg", [2, [[replacement, 0]]])
    third = index()

    assert len(third.reorgs) == 1
    rewound = third.reorgs[0]
    assert rewound.published == first.actions and rewound.unpublished == second.actions
    assert cancel_outcomes == {first.actions[0]: "CANCELED"}
    assert runs.find(first.actions[0], org_id=None, runtime=sched_runtime).status == "CANCELED"
    assert db.execute(
        "SELECT status, error LIKE 'ORPHANED%%' FROM outbox_events WHERE job_id = %s",
        (second.actions[0],),
    ).fetchone() == ("FAILED", True)
    # The projections are the new chain's: a[3]'s purchase only, its badge staged once.
    assert db.execute(
        "SELECT player, ticket_count FROM lottery_tickets WHERE round_id = %s", (round_id,)
    ).fetchall() == [(a[3].address, 2)]
    scope = f"{jobs.indexer.chain_id}-{world.contracts[LOTTERY].lower()}"
    assert third.actions == [f"MINT_BADGE-{scope}-{round_id}-{a[3].address.lower()}"]
    assert db.execute(
        "SELECT count(*) FROM indexed_actions WHERE status = 'ORPHANED'"
    ).fetchone() == (2,)
    cursor = db.execute("SELECT block_number, block_hash FROM chain_cursor").fetchone()
    head = world.client.request("eth_getBlockByNumber", ["latest", False])
    assert cursor == (int(head["number"], 16), head["hash"].lower())
    # The relay publishes only the live action.
    stats = relay_once(sched_runtime, now=now())
    assert (stats.published, stats.duplicates) == (1, 0)


def test_a_fork_deeper_than_the_stored_hashes_rewinds_once_and_moves_on(
    world: World, sched_runtime: Runtime, jobs: chain.ChainJobs, db: Any
) -> None:
    """Hashes are kept `hash_depth` blocks back: a fork below all of them is found by walking
    the node's chain back from the cursor, rewound once, and indexing goes on from there."""
    from dataclasses import replace

    from structlog.testing import capture_logs

    a = world.accounts
    config = replace(jobs.indexer, hash_depth=1)

    def index() -> Any:
        return sync_once(jobs.client, sched_runtime.sessions, config, cancel=lambda j: "n/a")

    world.buy(a[1], 1)
    index()
    devnet.mine(world.client, 4)
    index()  # the hash of a[1]'s block is pruned: only the last ones are kept
    assert db.execute("SELECT count(*) FROM indexed_blocks").fetchone()[0] <= 2
    replacement = signed_purchase(world, a[3], 2)
    world.client.request("anvil_reorg", [3, [[replacement, 0]]])
    devnet.mine(world.client, 2)

    with capture_logs() as logs:
        passes = [index() for _ in range(3)]
    reorgs = [e for e in logs if "reorg" in e["event"]]
    assert len(reorgs) == 1, reorgs
    assert sum(len(p.reorgs) for p in passes) == 1
    head = world.client.request("eth_getBlockByNumber", ["latest", False])
    cursor = db.execute("SELECT block_number, block_hash FROM chain_cursor").fetchone()
    assert cursor == (int(head["number"], 16), head["hash"].lower())
    assert sorted(
        db.execute("SELECT player, ticket_count FROM lottery_tickets").fetchall()
    ) == sorted([(a[1].address, 1), (a[3].address, 2)])
    # Every stored hash is the node's.
    for number, stored in db.execute("SELECT block_number, block_hash FROM indexed_blocks"):
        block = world.client.request("eth_getBlockByNumber", [hex(number), False])
        assert stored == block["hash"].lower()


def test_a_stale_hash_at_the_start_of_indexing_is_rewound_once_not_in_a_loop(
    world: World, sched_runtime: Runtime, jobs: chain.ChainJobs, db: Any
) -> None:
    """The node no longer has the block the cursor sits on, and no stored hash below it (a node
    restarted without its state, say): one rewind to the start, the node's hash stored."""
    from dataclasses import replace

    from structlog.testing import capture_logs

    devnet.mine(world.client, 3)
    config = replace(jobs.indexer, start_block=3)
    stale = "0x" + "de" * 32
    db.execute(
        "INSERT INTO chain_cursor (name, chain_id, block_number, block_hash) VALUES"
        " ('lottery', %s, 2, %s)",
        (config.chain_id, stale),
    )
    db.execute(
        "INSERT INTO indexed_blocks (chain_id, block_number, block_hash) VALUES (%s, 2, %s)",
        (config.chain_id, stale),
    )
    world.buy(world.accounts[1], 1)

    with capture_logs() as logs:
        passes = [
            sync_once(jobs.client, sched_runtime.sessions, config, cancel=lambda j: "n/a")
            for _ in range(3)
        ]
    assert len([e for e in logs if "reorg" in e["event"]]) == 1
    assert sum(len(p.reorgs) for p in passes) == 1
    head = world.client.block_number()
    assert passes[-1].cursor == head
    assert db.execute(
        "SELECT block_hash FROM indexed_blocks WHERE block_number = 2"
    ).fetchone() in (
        None,
        (world.client.request("eth_getBlockByNumber", ["0x2", False])["hash"].lower(),),
    )
    assert db.execute("SELECT count(*) FROM lottery_tickets").fetchone() == (1,)


@pytest.mark.slow
def test_a_settled_mint_removed_by_a_deeper_reorg_is_sent_again_exactly_once(
    world: World, sched_runtime: Runtime, jobs: chain.ChainJobs, workers: Workers, db: Any
) -> None:
    """Mint settled at 3 confirmations, then `anvil_reorg` deeper than that removes it: the
    indexer's rewind finds the settled transaction gone, the journal stops claiming CONFIRMED,
    the action is staged again once and minted once; more passes send nothing more."""
    from tests.workers.chain_actions.test_worker import mint

    player, operator = world.accounts[4].address, world.operator.address
    start = world.nonce(operator)
    workers.start(INDEXER_CONFIRMATIONS="3")
    job = mint(world, 3, player)

    def index() -> Any:
        return sync_once(
            jobs.client,
            sched_runtime.sessions,
            jobs.indexer,
            cancel=lambda j: runs.cancel(j, org_id=None, runtime=sched_runtime),
            release=sched_runtime.sender.gate.forget,
        )

    def settled(job_id: str) -> Any:
        view = runs.find(job_id, org_id=None, runtime=sched_runtime)
        if view is not None and view.status in ("COMPLETED", "DEAD"):
            return view
        devnet.mine(world.client)  # blocks keep coming, as on a real chain
        return None

    first = wait_for(lambda: settled(job), timeout=40, interval=0.3, what="the mint settled")
    assert first.status == "COMPLETED" and first.result["outcome"] == "confirmed"
    block = first.result["block_number"]
    assert world.client.block_number() - block >= 3
    index()
    assert db.execute("SELECT count(*) FROM badges").fetchone() == (1,)

    depth = world.client.block_number() - block + 2  # one block deeper than the mint
    world.client.request("anvil_reorg", [depth, []])
    assert not world.has_badge(player, 3)
    result = index()
    assert [u.resent for u in result.unsettled] == [[job]]
    row = db.execute(
        "SELECT status, error_code FROM chain_actions WHERE job_id = %s", (job,)
    ).fetchone()
    assert row == ("PENDING", "REORGED")  # never CONFIRMED for a transaction not on chain
    assert db.execute("SELECT count(*) FROM badges").fetchone() == (0,)

    assert relay_once(sched_runtime, now=now()).published == 1
    again = wait_for(lambda: settled(job), timeout=40, interval=0.3, what="the re-sent mint")
    assert again.status == "COMPLETED" and again.result["outcome"] == "confirmed"
    for _ in range(3):
        devnet.mine(world.client)
        index()
    assert relay_once(sched_runtime, now=now()).published == 0
    assert world.has_badge(player, 3) and world.badge_call("balanceOf", player)[0] == 1
    assert world.nonce(operator) == start + 1  # the removed mint's nonce, used once again
    assert db.execute(
        "SELECT count(*) FROM job_runs WHERE job_id LIKE %s", (job + "%",)
    ).fetchone() == (2,)  # the settled run archived, and the re-sent one
    assert db.execute(
        "SELECT status, error_code FROM chain_actions WHERE job_id = %s", (job,)
    ).fetchone() == ("CONFIRMED", None)
    assert db.execute("SELECT count(*) FROM badges").fetchone() == (1,)
    from scheduler.chain.reconcile import reorg_status

    assert reorg_status(db, world.client.chain_id()) == {"reorged_settled_actions": 1}
