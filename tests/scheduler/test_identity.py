"""Identity across deployments: a lottery redeployed on the same chain (its rounds start at 1
again), and a chain restarted from genesis under the same chain id with the contracts at the
same addresses while Postgres keeps everything (`make run` restarted without anvil's state).
Each time the new round 1 is drawn, projected, badged and paid, as the first one was."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from structlog.testing import capture_logs

from chain import devnet
from chain.abi import LOTTERY
from chain.client import ChainClient
from chain.deploy import LotteryConfig, deploy_reference
from chain.registry import record_deployment
from scheduler.chain import jobs as chain
from scheduler.chain.indexer import sync_once
from scheduler.chain.keeper import run_once
from shared.config import Settings
from shared.jobs import runs
from shared.outbox import relay_once
from shared.runtime import Runtime
from tests.support.chain.fixtures import Workers, chain_env
from tests.support.chain.world import MIN_PLAYERS, ROUND_S, TICKET, World
from tests.support.wait import wait_for

from .conftest import now

pytestmark = pytest.mark.slow


def play_round(world: World, rt: Runtime, jobs: chain.ChainJobs) -> tuple[int, list[str]]:
    """Round `current` with two players through keeper, indexer, relay and the worker."""
    a = world.accounts
    round_id = world.current_round()
    world.buy(a[1])
    world.buy(a[2])
    world.end_round()
    kept = run_once(jobs.keeper, now())
    assert (kept.outcome, kept.round_id) == ("draw_requested", round_id), kept
    synced = sync_once(jobs.client, rt.sessions, jobs.indexer, cancel=lambda j: "n/a")
    assert len(synced.actions) == 3, synced.actions  # two badges and the prize
    assert relay_once(rt, now=now()).published == 3

    def completed() -> bool:
        views = [runs.find(j, org_id=None, runtime=rt) for j in synced.actions]
        return all(v is not None and v.status == "COMPLETED" for v in views)

    wait_for(completed, timeout=90, interval=0.1, what="the round's chain actions")
    assert world.lottery_call("getRound", round_id)[0][9] is True  # prizeClaimed
    assert world.has_badge(a[1].address, round_id) and world.has_badge(a[2].address, round_id)
    return round_id, synced.actions


def redeploy(client: ChainClient, world: World, chain_id: int, conn: Any) -> dict[str, str]:
    config = LotteryConfig(
        ticket_price_wei=TICKET, round_duration_s=ROUND_S, min_players=MIN_PLAYERS
    )
    deployed = deploy_reference(
        client, world.operator, operator=world.operator.address, config=config
    )
    for deployment in deployed.values():
        record_deployment(conn, chain_id, deployment)
    return {name: d.address for name, d in deployed.items()}


def test_a_redeployed_lottery_runs_its_round_one_to_the_end(
    world: World,
    workers: Workers,
    sched_runtime: Runtime,
    config: chain.ChainConfig,
    jobs: chain.ChainJobs,
    db: Any,
) -> None:
    workers.start()
    first_round, first_actions = play_round(world, sched_runtime, jobs)

    running = chain.jobs_for(sched_runtime, config)  # the scheduler's, built at its first pass
    contracts = redeploy(world.client, world, world.client.chain_id(), db)
    second = World(world.client, world.accounts, contracts)
    assert second.current_round() == first_round  # rounds start again: same round ids
    # The running scheduler picks the new deployment up at its next pass, without a restart.
    again = chain.jobs_for(sched_runtime, config)
    assert running is not None and running.indexer.lottery == world.contracts[LOTTERY]
    assert again is not None and again.indexer.lottery == contracts[LOTTERY]
    assert chain.jobs_for(sched_runtime, config) is again  # built once per deployment
    second_round, second_actions = play_round(second, sched_runtime, again)

    assert second_round == first_round and not set(first_actions) & set(second_actions)
    lottery = contracts[LOTTERY].lower()
    assert all(f"-{world.client.chain_id()}-{lottery}-{second_round}-" in j for j in second_actions)


def test_a_chain_restarted_from_genesis_runs_its_round_one_again(
    world: World,
    runtime: Runtime,
    settings: Settings,
    config: chain.ChainConfig,
    tmp_path: Any,
    db: Any,
) -> None:
    assert config.chain.chain_id is not None
    chain_id = config.chain.chain_id + 1  # another chain id than the session's anvil
    port = devnet.free_port()
    node = devnet.start_anvil(port=port, chain_id=chain_id)
    # Only the node differs from the session's chain jobs (no confirmations, from block 0).
    other = replace(
        config,
        chain=config.chain.model_copy(
            update={"rpc_url": node.url, "chain_id": chain_id, "receipt_timeout_s": 120.0}
        ),
    )
    group = Workers(tmp_path, chain_env(node))
    rt = Runtime(settings)
    try:
        client = ChainClient.connect(node.url)
        contracts = redeploy(client, world, chain_id, db)
        mine = World(client, world.accounts, contracts)
        group.start()
        first_round, first_actions = play_round(mine, rt, chain.build(rt, other))

        # The node restarts without its state: same chain id, same deployer, same addresses.
        node.stop()
        node = devnet.start_anvil(port=port, chain_id=chain_id)
        assert redeploy(client, world, chain_id, db) == contracts
        assert mine.current_round() == first_round
        with capture_logs() as logs:
            jobs = chain.build(rt, other)  # the scheduler's start
        resets = [e for e in logs if e["event"] == "chain.genesis_changed"]
        assert len(resets) == 1 and resets[0]["chain_id"] == chain_id
        assert resets[0]["runs_archived"] == 3

        again_round, again_actions = play_round(mine, rt, jobs)
        mints = sorted(j for j in first_actions if j.startswith("MINT_BADGE"))
        assert again_round == first_round
        assert sorted(j for j in again_actions if j.startswith("MINT_BADGE")) == mints
        # The old chain's runs are kept, under archived ids.
        assert db.execute(
            "SELECT count(*) FROM job_runs WHERE job_id LIKE %s", ("%@genesis:%",)
        ).fetchone() == (3,)
        with capture_logs() as logs:
            chain.build(rt, other)  # a second start on the same chain resets nothing
        assert not [e for e in logs if e["event"] == "chain.genesis_changed"]
    finally:
        group.stop_all()
        rt.close()
        node.stop()
