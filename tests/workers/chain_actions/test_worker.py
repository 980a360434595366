"""`dramatiq workers.chain_actions.app` processes on anvil: the whole path, several processes
sharing one signer, a node that is down then up, and a worker killed mid-transaction."""

from __future__ import annotations

import time
from typing import Any

import pytest

from chain import devnet
from chain.abi import LOTTERY
from shared.contracts.base import SYSTEM_ORG
from shared.jobs import catalog, runs
from shared.runtime import Runtime
from tests.support.chain.fixtures import Workers
from tests.support.chain.world import KEK_A, World, project_ticket
from tests.support.proxy import Proxy
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def finished(runtime: Runtime, job_ids: list[str], timeout: float = 40) -> list[runs.RunView]:
    def probe() -> list[runs.RunView] | None:
        views = [runs.find(j, org_id=None, runtime=runtime) for j in job_ids]
        if all(v is not None and v.status in ("COMPLETED", "DEAD") for v in views):
            return views  # type: ignore[return-value]
        return None

    return wait_for(probe, timeout=timeout, interval=0.1, what=f"{len(job_ids)} runs to finish")


def scope(world: World) -> dict[str, Any]:
    """The v2 payload fields naming the session's deployment."""
    return {"chain_id": world.client.chain_id(), "contract": world.contracts[LOTTERY]}


def mint(world: World, round_id: int, player: str) -> str:
    """Send a mint for `player`, whose ticket in `round_id` the projections know."""
    from shared.runtime import get_runtime

    with get_runtime().pool.connection() as conn:
        project_ticket(conn, world.client.chain_id(), world.contracts[LOTTERY], round_id, player)
    return catalog.CHAIN_MINT_BADGE.send(
        {"org_id": SYSTEM_ORG, **scope(world), "round_id": round_id, "player": player}
    ).job_id


def test_the_worker_runs_each_action_and_never_logs_a_private_key(
    world: World, workers: Workers, runtime: Runtime
) -> None:
    a = world.accounts
    prize_round, winner = world.drawn_round(a[1], a[2])
    refund_round = world.cancelled_round(a[3])
    stranger_round = world.cancelled_round(a[8])  # a payer whose wallet the fleet does not know
    workers.start(LOG_LEVEL="DEBUG")
    jobs = [
        mint(world, prize_round, a[1].address),
        catalog.CHAIN_CLAIM_PRIZE.send(
            {
                "org_id": SYSTEM_ORG,
                **scope(world),
                "round_id": prize_round,
                "winner": winner.address,
            }
        ).job_id,
        catalog.CHAIN_CLAIM_REFUND.send(
            {"org_id": SYSTEM_ORG, **scope(world), "round_id": refund_round, "payer": a[3].address}
        ).job_id,
    ]
    stranger = catalog.CHAIN_CLAIM_REFUND.send(
        {"org_id": SYSTEM_ORG, **scope(world), "round_id": stranger_round, "payer": a[8].address}
    )
    views = finished(runtime, [*jobs, stranger.job_id])
    assert [(v.status, v.result["outcome"]) for v in views] == [("COMPLETED", "confirmed")] * 3 + [
        ("COMPLETED", "skipped")
    ]
    assert world.has_badge(a[1].address, prize_round)
    assert world.lottery_call("getRound", prize_round)[0][9] is True  # prizeClaimed
    assert world.lottery_call("paidBy", refund_round, a[3].address)[0] == 0

    logs = workers.logs().lower()
    assert "chain_action.confirmed" in logs and "tx.broadcast" in logs  # the logs were captured
    assert f"unknown wallet {a[8].address.lower()}" in logs  # the skip is logged with its reason
    for account in world.accounts:
        assert bytes(account.key).hex() not in logs
    assert KEK_A.lower() not in logs


def test_two_workers_racing_on_one_signer_use_consecutive_nonces(
    world: World, workers: Workers, runtime: Runtime, db: Any
) -> None:
    start = world.nonce(world.operator.address)
    workers.start(threads=4)
    workers.start(threads=4)
    players = ["0x" + f"{i:02x}" * 20 for i in range(1, 11)]
    views = finished(runtime, [mint(world, 7, p) for p in players])
    assert {v.status for v in views} == {"COMPLETED"}
    nonces = sorted(
        r[0] for r in db.execute("SELECT nonce FROM chain_actions WHERE status = 'CONFIRMED'")
    )
    assert nonces == list(range(start, start + len(players)))
    assert world.nonce(world.operator.address) == start + len(players)
    assert all(world.has_badge(p, 7) for p in players)


def test_a_node_down_for_12_s_is_waited_out_without_spending_attempts(
    world: World, workers: Workers, runtime: Runtime, anvil: devnet.Anvil
) -> None:
    """An outage twice as long as the attempts' back-offs (5 attempts from 300 ms here: 4.5-5.6 s
    in all): the actions wait for the node without spending attempts and complete by themselves
    when it returns."""
    port = devnet.free_port()
    proxy = Proxy(port, ("127.0.0.1", int(anvil.url.rsplit(":", 1)[1])))
    operator = world.operator.address
    start = world.nonce(operator)
    workers.start(CHAIN_RPC_URL=f"http://127.0.0.1:{port}", CHAIN_OUTAGE_RETRY_MAX_S="2")
    players = [world.accounts[i].address for i in (4, 5, 6)]
    jobs = [mint(world, 3, p) for p in players]
    down_since = time.monotonic()
    waiting = wait_for(
        lambda: (
            (v := runs.find(jobs[0], org_id=None, runtime=runtime))
            and v.error_code == "NODE_OUTAGE"
            and v
        ),
        timeout=60,  # a worker process may take a while to start on a loaded machine
        what="an action waiting for the node",
    )
    assert waiting.status == "QUEUED" and "EVM node unavailable" in (waiting.error or "")
    time.sleep(max(0.0, 12 - (time.monotonic() - down_since)))
    # Still waiting (between two tries, or in one): neither failed nor dead.
    assert {runs.find(j, org_id=None, runtime=runtime).status for j in jobs} <= {
        "QUEUED",
        "RUNNING",
    }
    proxy.up()
    try:
        views = finished(runtime, jobs, timeout=30)
    finally:
        proxy.down()
    assert [(v.status, v.result["outcome"]) for v in views] == [("COMPLETED", "confirmed")] * 3
    assert [v.attempt for v in views] == [1, 1, 1]  # the outage spent no attempt
    assert all(world.has_badge(p, 3) for p in players)
    assert world.nonce(operator) == start + 3  # each intent once on chain


def test_an_outage_longer_than_its_window_ends_dead_with_the_reason(
    world: World, workers: Workers, runtime: Runtime
) -> None:
    """The window logic with a 3 s window (the default is an hour): DEAD, NODE_UNAVAILABLE."""
    unreachable = f"http://127.0.0.1:{devnet.free_port()}"
    workers.start(
        CHAIN_RPC_URL=unreachable,
        CHAIN_OUTAGE_WINDOW_S="3",
        CHAIN_OUTAGE_RETRY_MIN_S="0.3",
        CHAIN_OUTAGE_RETRY_MAX_S="1",
    )
    began = time.monotonic()
    (view,) = finished(runtime, [mint(world, 3, world.accounts[4].address)], timeout=30)
    assert time.monotonic() - began >= 3
    assert (view.status, view.error_code, view.attempt) == ("DEAD", "NODE_UNAVAILABLE", 1)
    assert "outage window 3s" in (view.error or "") and "ConnectionError" in (view.error or "")
    assert "File " not in (view.error or "")  # a permanent failure: its message, no frames


def test_a_worker_killed_after_broadcast_sends_no_second_transaction(
    world: World, workers: Workers, runtime: Runtime, db: Any
) -> None:
    player, operator = world.accounts[5].address, world.operator.address
    start = world.nonce(operator)
    devnet.set_automine(world.client, False)
    first = workers.start()
    job = mint(world, 4, player)

    def journaled() -> str | None:
        row = db.execute(
            "SELECT status, tx_hash FROM chain_actions WHERE job_id = %s", (job,)
        ).fetchone()
        return row[1] if row and row[0] == "SENT" else None

    tx_hash = wait_for(journaled, timeout=20, what="the transaction journaled")
    wait_for(
        lambda: world.client.transaction(tx_hash),
        timeout=10,
        what="the transaction in the node's pool",
    )
    workers.kill(first)  # SIGKILL while it waits for the receipt
    workers.start()
    wait_for(
        lambda: (
            db.execute("SELECT attempts FROM chain_actions WHERE job_id = %s", (job,)).fetchone()[0]
            >= 2
        ),
        timeout=20,
        what="the redelivered job reconciling",
    )
    devnet.mine(world.client)
    (view,) = finished(runtime, [job])
    assert view.status == "COMPLETED" and view.result["reconciled"] is True
    assert view.result["tx_hash"] == tx_hash
    assert world.nonce(operator) == start + 1  # exactly one transaction from the operator
    sent = db.execute(
        "SELECT jsonb_array_length(tx_hashes) FROM chain_actions WHERE job_id = %s", (job,)
    )
    assert sent.fetchone()[0] == 1
    assert world.has_badge(player, 4) and world.badge_call("balanceOf", player)[0] == 1
