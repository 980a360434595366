"""Chain actions per second on anvil, with 1 and with 4 signers.

    .venv/bin/python bench/chain_actions.py [--actions 120] [--threads 8] [--repeat 3]

A private anvil, database and broker namespace (bench/sandbox.py); the reference contracts are
deployed with rounds that need 5 players, so rounds bought by at most 4 payers get cancelled.
Each repetition, per case:

- setup (not timed): cancelled rounds whose payers are the case's signers, `--actions` refunds
  to claim in all (1 signer: one payer in N rounds; 4 signers: four payers in N/4 rounds);
- the `chain:claim_refund` jobs are sent, then one worker process starts
  (`dramatiq workers.chain_actions --processes 1 --threads T`) and drains them: every action is
  journaled, locked per signer, preflighted, signed, broadcast and confirmed by its receipt;
- actions/s = (N - 1) / (last `finished_at` - first `finished_at`) in `job_runs` (from the first
  completion on: the process's warm-up, web3 import and first connections, is left out).

A `chain:mint_badge` case (the operator signs every mint) is measured the same way.
Prints one JSON document; medians over the repetitions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import psycopg  # noqa: E402

from bench.sandbox import Sandbox  # noqa: E402
from shared.chain import devnet  # noqa: E402
from shared.chain.abi import LOTTERY, encode_call  # noqa: E402
from shared.chain.client import ChainClient  # noqa: E402
from shared.chain.deploy import LotteryConfig, deploy_reference  # noqa: E402
from shared.chain.keys import Keyring, new_kek  # noqa: E402
from shared.chain.registry import record_deployment  # noqa: E402
from shared.chain.wallets import EMBEDDED, OPERATOR, store_wallet  # noqa: E402
from shared.config import get_settings  # noqa: E402
from shared.contracts.base import SYSTEM_ORG  # noqa: E402
from shared.jobs import catalog  # noqa: E402
from shared.runtime import Runtime, set_runtime  # noqa: E402

TICKET = 10**15
ROUND_S = 60


def cancelled_rounds(
    client: ChainClient, owner: Any, lottery: str, payers: list[Any], rounds: int
) -> list[int]:
    ids = []
    for _ in range(rounds):
        (round_id,) = decode_uint(
            client.call({"to": lottery, "data": encode_call(LOTTERY, "currentRoundId")})
        )
        for payer in payers:
            devnet.transact(
                client, payer, lottery, encode_call(LOTTERY, "buyTickets", 1), value=TICKET
            )
        devnet.increase_time(client, ROUND_S + 1)
        devnet.transact(client, owner, lottery, encode_call(LOTTERY, "closeExpiredRound"))
        ids.append(round_id)
    return ids


def decode_uint(data: bytes) -> tuple[int]:
    return (int.from_bytes(data[:32], "big"),)


def drain(sandbox: Sandbox, env: dict[str, str], job_ids: list[str], threads: int) -> float:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dramatiq",
            "workers.chain_actions",
            "--processes",
            "1",
            "--threads",
            str(threads),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        with psycopg.connect(sandbox.dsn, autocommit=True) as conn:
            while True:
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE status IN ('COMPLETED', 'DEAD')),"
                    " count(*) FILTER (WHERE status = 'DEAD'),"
                    " extract(epoch FROM max(finished_at) - min(finished_at))"
                    " FROM job_runs WHERE job_id = ANY(%s)",
                    (job_ids,),
                ).fetchone()
                assert row is not None
                if row[0] == len(job_ids):
                    if row[1]:
                        raise RuntimeError(f"{row[1]} actions died")
                    return (len(job_ids) - 1) / float(row[2])
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{row[0]}/{len(job_ids)} actions finished")
                time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--actions", type=int, default=120)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    sandbox = Sandbox(get_settings())
    node = devnet.start_anvil(chain_id=31_337)
    kek = new_kek()
    try:
        sandbox.create()
        settings = sandbox.settings
        runtime = Runtime(settings)
        set_runtime(runtime)
        client = ChainClient.connect(node.url)
        accounts = devnet.dev_accounts(6)
        owner = accounts[0]
        config = LotteryConfig(ticket_price_wei=TICKET, round_duration_s=ROUND_S, min_players=5)
        contracts = deploy_reference(client, owner, operator=owner.address, config=config)
        lottery = contracts[LOTTERY].address
        scope = {"chain_id": node.chain_id, "contract": lottery}
        from pydantic import SecretStr

        ring = Keyring.from_settings({"bench": SecretStr(kek)}, "bench")
        with psycopg.connect(sandbox.dsn) as conn:
            for deployment in contracts.values():
                record_deployment(conn, node.chain_id, deployment)
            store_wallet(conn, ring, bytes(owner.key), kind=OPERATOR)
            for account in accounts[1:5]:
                store_wallet(conn, ring, bytes(account.key), kind=EMBEDDED)
        env = sandbox.env(
            CHAIN_RPC_URL=node.url,
            CHAIN_ID=str(node.chain_id),
            CHAIN_KEKS=json.dumps({"bench": kek}),
            CHAIN_KEK_ID="bench",
            LOG_LEVEL="WARNING",
            # Anvil mines on demand here: no blocks would come to confirm a receipt.
            INDEXER_CONFIRMATIONS="0",
        )
        n = args.actions
        results: dict[str, list[float]] = {
            "claim_refund, 1 signer": [],
            "claim_refund, 4 signers": [],
            "mint_badge, 1 signer (operator)": [],
        }
        for rep in range(args.repeat):
            for case, payers in (
                ("claim_refund, 1 signer", accounts[1:2]),
                ("claim_refund, 4 signers", accounts[1:5]),
            ):
                rounds = cancelled_rounds(client, owner, lottery, payers, n // len(payers))
                jobs = [
                    catalog.CHAIN_CLAIM_REFUND.send(
                        {"org_id": SYSTEM_ORG, **scope, "round_id": r, "payer": p.address}
                    ).job_id
                    for r in rounds
                    for p in payers
                ]
                runtime.sender.flush()
                results[case].append(drain(sandbox, env, jobs, args.threads))
            base = 1_000_000 * (rep + 1)
            # The worker mints only for a player the indexer saw buy a ticket in that round:
            # the rows the indexer would have written.
            with psycopg.connect(sandbox.dsn) as conn:
                conn.cursor().executemany(
                    "INSERT INTO lottery_tickets (chain_id, contract, tx_hash, log_index,"
                    " block_number, round_id, player, ticket_count, amount_wei)"
                    " VALUES (%s, %s, %s, 0, 0, %s, %s, 1, %s)",
                    [
                        (node.chain_id, lottery, f"0x{base + i:064x}", base + i,
                         accounts[5].address, TICKET)
                        for i in range(n)
                    ],
                )  # fmt: skip
            jobs = [
                catalog.CHAIN_MINT_BADGE.send(
                    {
                        "org_id": SYSTEM_ORG,
                        **scope,
                        "round_id": base + i,
                        "player": accounts[5].address,
                    }
                ).job_id
                for i in range(n)
            ]
            runtime.sender.flush()
            results["mint_badge, 1 signer (operator)"].append(
                drain(sandbox, env, jobs, args.threads)
            )
        report = {
            "actions": n,
            "threads": args.threads,
            "repeat": args.repeat,
            "actions_per_s": {case: round(statistics.median(v), 1) for case, v in results.items()},
            "runs": {case: [round(x, 1) for x in v] for case, v in results.items()},
        }
        print(json.dumps(report, indent=2))
        runtime.close()
    finally:
        set_runtime(None)
        node.stop()
        sandbox.destroy()


if __name__ == "__main__":
    main()
