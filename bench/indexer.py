"""Indexer catch-up (blocks/s, logs/s) and keeper reaction time, on a private anvil.

    .venv/bin/python bench/indexer.py [--blocks 100000] [--purchases 2000] [--repeat 3]
                                      [--bursts 100] [--rounds 5] [--keeper-interval-ms 10000]

A private anvil, database and broker namespace (bench/sandbox.py); the reference contracts are
deployed and recorded, the operator wallet stored.

- Setup (not timed): `--purchases` ticket purchases (one `TicketsPurchased` log each) in
  `--bursts` blocks spread evenly over `--blocks` blocks made with `anvil_mine` (so every
  2,000-block window holds logs). Anvil 1.7 re-hashes the whole state for every mined block, so
  the setup time grows with purchases x blocks: ~200 s for the defaults.
- Catch-up, `--repeat` times from an empty cursor: one `sync_once` pass (windows of 2,000
  blocks, no confirmations, no time budget) projects every log, stages the follow-up actions in
  the outbox and advances the cursor to the head; blocks/s and logs/s over the pass.
- Keeper: a keeper loop runs `run_once` every `--keeper-interval-ms` (what the scheduler does);
  for each of `--rounds` rounds with two players, the round is made draw-ready at a moment
  unrelated to the loop (`evm_increaseTime` + one block), and the reaction time is from then
  until the draw transaction is mined (the round reads Completed). The pass that drew is timed
  too (lock, views, preflight, sign, journal, broadcast, receipt).
Prints one JSON document (medians, and every run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import psycopg  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from bench.sandbox import Sandbox  # noqa: E402
from chain import devnet  # noqa: E402
from chain.abi import LOTTERY, decode_result, encode_call  # noqa: E402
from chain.client import ChainClient  # noqa: E402
from chain.deploy import LotteryConfig, deploy_reference  # noqa: E402
from chain.errors import RpcError  # noqa: E402
from chain.fees import GWEI, initial_fees  # noqa: E402
from chain.keys import Keyring, new_kek  # noqa: E402
from chain.registry import record_deployment  # noqa: E402
from chain.settings import ChainSettings  # noqa: E402
from chain.wallets import OPERATOR, store_wallet  # noqa: E402
from scheduler.chain import jobs as chain  # noqa: E402
from scheduler.chain.indexer import sync_once  # noqa: E402
from scheduler.chain.keeper import run_once  # noqa: E402
from scheduler.settings import IndexerSettings, KeeperSettings  # noqa: E402
from shared.config import get_settings  # noqa: E402
from shared.runtime import Runtime  # noqa: E402

TICKET = 10**15
PROJECTIONS = (
    "chain_cursor, indexed_blocks, lottery_rounds, lottery_tickets, lottery_winners,"
    " lottery_cancellations, badges, indexed_actions, outbox_events"
)


def view(client: ChainClient, lottery: str, fn: str, *args: Any) -> Any:
    data = client.call({"to": lottery, "data": encode_call(LOTTERY, fn, *args)})
    return decode_result(LOTTERY, fn, data)[0]


def make_history(
    client: ChainClient, lottery: str, players: list[Any], blocks: int, purchases: int, bursts: int
) -> None:
    """`purchases` purchases in `bursts` blocks, spread evenly over about `blocks` blocks."""
    size = max(1, purchases // bursts)
    gap = max(0, blocks // bursts - 1)
    nonces = {p.address: client.nonce(p.address, "latest") for p in players}
    fees = initial_fees(client.base_fee(), priority_fee=GWEI, cap=1_000 * GWEI)
    data = encode_call(LOTTERY, "buyTickets", 1)
    devnet.set_automine(client, False)
    try:
        for b in range(bursts):
            for i in range(size):
                player = players[(b * size + i) % len(players)]
                tx = {
                    "type": 2,
                    "chainId": client.chain_id(),
                    "nonce": nonces[player.address],
                    "to": lottery,
                    "data": data,
                    "value": TICKET,
                    "gas": 300_000,
                    **fees.as_tx_fields(),
                }
                nonces[player.address] += 1
                client.send_raw(bytes(player.sign_transaction(tx).raw_transaction))
            devnet.mine(client, 1)
            if gap:
                devnet.mine(client, gap)
    finally:
        devnet.set_automine(client, True)


def catch_up(runtime: Runtime, jobs: chain.ChainJobs, expected_logs: int) -> dict[str, float]:
    with psycopg.connect(runtime.settings.database_dsn, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {PROJECTIONS}")
    started = time.perf_counter()
    result = sync_once(jobs.client, runtime.sessions, jobs.indexer, cancel=lambda j: "")
    elapsed = time.perf_counter() - started
    assert result.cursor == result.head, (result.cursor, result.head)
    assert result.logs >= expected_logs, (result.logs, expected_logs)
    return {
        "seconds": elapsed,
        "blocks": result.blocks,
        "logs": result.logs,
        "actions": len(result.actions),
        "blocks_per_s": result.blocks / elapsed,
        "logs_per_s": result.logs / elapsed,
    }


def _status(client: ChainClient, lottery: str, round_id: int) -> int:
    try:
        return int(view(client, lottery, "getRound", round_id)[0])
    except RpcError:  # anvil answers BlockOutOfRange to a call racing a block being mined
        return -1


def keeper_reactions(
    runtime: Runtime, jobs: chain.ChainJobs, players: list[Any], rounds: int, interval_s: float
) -> tuple[list[float], list[float]]:
    client, lottery = jobs.client, jobs.keeper.lottery
    passes: list[float] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            outcome = run_once(jobs.keeper, datetime.now(UTC)).outcome
            if outcome == "draw_requested":
                passes.append(time.perf_counter() - t)
            stop.wait(max(0.0, interval_s - (time.perf_counter() - t)))

    reactions: list[float] = []
    keeper = threading.Thread(target=loop, daemon=True)
    keeper.start()
    try:
        for _ in range(rounds):
            round_id = int(view(client, lottery, "currentRoundId"))
            for p in players[:2]:
                devnet.transact(
                    client, p, lottery, encode_call(LOTTERY, "buyTickets", 1), value=TICKET
                )
            time.sleep(random.uniform(0, interval_s))  # unrelated to the keeper's phase
            end = int(view(client, lottery, "getRound", round_id)[1])
            now_chain = int(
                client.request("eth_getBlockByNumber", ["latest", False])["timestamp"], 16
            )
            client.request("evm_increaseTime", [max(1, end - now_chain + 1)])
            client.request("evm_mine", [])
            ready = time.perf_counter()
            while _status(client, lottery, round_id) != 3:  # Completed
                if time.perf_counter() - ready > interval_s * 3 + 30:
                    raise TimeoutError(f"round {round_id} not drawn")
                time.sleep(0.005)
            reactions.append(time.perf_counter() - ready)
    finally:
        stop.set()
        keeper.join()
    return reactions, passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--blocks", type=int, default=100_000)
    parser.add_argument("--purchases", type=int, default=2_000)
    parser.add_argument("--bursts", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keeper-interval-ms", type=int, default=10_000)
    args = parser.parse_args()

    sandbox = Sandbox(get_settings())
    # Cancun (no EIP-2935 history contract) and pruned state history: anvil 1.7 otherwise slows
    # down with every mined block (foundry-rs/foundry#15715) and 100,000 blocks take hours.
    node = devnet.start_anvil(chain_id=31_337, extra=("--hardfork", "cancun", "--prune-history"))
    kek = new_kek()
    runtime: Runtime | None = None
    try:
        sandbox.create()
        client = ChainClient.connect(node.url)
        setup_client = ChainClient.connect(node.url, timeout_s=300)  # anvil_mine of long gaps
        accounts = devnet.dev_accounts(10)
        owner, players = accounts[0], accounts[1:]
        config = LotteryConfig(ticket_price_wei=TICKET, round_duration_s=10**8, min_players=2)
        contracts = deploy_reference(client, owner, operator=owner.address, config=config)
        lottery = contracts[LOTTERY].address
        ring = Keyring.from_settings({"bench": SecretStr(kek)}, "bench")
        with psycopg.connect(sandbox.dsn) as conn:
            for deployment in contracts.values():
                record_deployment(conn, node.chain_id, deployment)
            store_wallet(conn, ring, bytes(owner.key), kind=OPERATOR)
        config = chain.ChainConfig(
            ChainSettings(
                rpc_url=node.url,
                chain_id=node.chain_id,
                keks={"bench": SecretStr(kek)},
                kek_id="bench",
                confirmations=0,
            ),
            IndexerSettings(tick_budget_s=1e9),
            KeeperSettings(
                interval_ms=args.keeper_interval_ms,
                lock_key=f"{sandbox.namespace}:chain:keeper-lock",
            ),
        )
        runtime = Runtime(sandbox.settings)
        jobs = chain.build(runtime, config)

        t = time.perf_counter()
        make_history(setup_client, lottery, players, args.blocks, args.purchases, args.bursts)
        setup_s = time.perf_counter() - t
        runs = [catch_up(runtime, jobs, args.purchases) for _ in range(args.repeat)]
        print(json.dumps({"catch_up_runs": runs}), file=sys.stderr, flush=True)

        # Short rounds from the next one on; the long history round is drawn first.
        devnet.transact(
            client, owner, lottery, encode_call(LOTTERY, "setRoundConfig", TICKET, 30, 2)
        )
        client.request("evm_increaseTime", [10**8])
        client.request("evm_mine", [])
        assert run_once(jobs.keeper, datetime.now(UTC)).outcome == "draw_requested"
        reactions, passes = keeper_reactions(
            runtime, jobs, players, args.rounds, args.keeper_interval_ms / 1000
        )
        report = {
            "blocks": runs[0]["blocks"],
            "bursts": args.bursts,
            "logs": runs[0]["logs"],
            "follow_up_actions": runs[0]["actions"],
            "setup_s": round(setup_s, 1),
            "repeat": args.repeat,
            "catch_up": {
                "blocks_per_s": round(statistics.median(r["blocks_per_s"] for r in runs)),
                "logs_per_s": round(statistics.median(r["logs_per_s"] for r in runs)),
                "seconds": [round(r["seconds"], 2) for r in runs],
            },
            "keeper": {
                "interval_ms": args.keeper_interval_ms,
                "rounds": args.rounds,
                "reaction_s_median": round(statistics.median(reactions), 3),
                "reaction_s_max": round(max(reactions), 3),
                "reaction_s": [round(r, 3) for r in reactions],
                "draw_pass_s_median": round(statistics.median(passes), 3) if passes else None,
            },
        }
        print(json.dumps(report, indent=2))
    finally:
        if runtime is not None:
            runtime.close()
        node.stop()
        sandbox.destroy()


if __name__ == "__main__":
    main()
