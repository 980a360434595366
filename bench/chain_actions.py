"""Chain actions per second on anvil, with 1 and with 4 signers.

    .venv/bin/python bench/chain_actions.py [--actions 120] [--threads 8] [--repeat 3]

A private anvil, database and broker namespace (bench/sandbox.py); the reference contracts are
deployed with rounds that need 5 players, so rounds bought by at most 4 payers get cancelled.
Each repetition, per case:

- setup (not timed): cancelled rounds whose payers are the case's signers, `--actions` refunds
  to claim in all (1 signer: one payer in N rounds; 4 signers: four payers in N/4 rounds);
- the `chain:claim_refund` jobs are sent, then one worker process starts
  (`dramatiq workers.chain_actions.app --processes 1 --threads T`) and drains them: every action is
  journaled, locked per signer, preflighted, signed, broadcast and confirmed by its receipt;
- actions/s = (N - 1) / (last `finished_at` - first `finished_at`) in `job_runs` (from the first
  completion on: the process's warm-up, web3 import and first connections, is left out).

A `chain:mint_badge` case (the operator signs every mint) is measured the same way.
Prints one JSON document; medians over the repetitions.

    .venv/bin/python bench/chain_actions.py --blocks --actions 200 [--threads 8] [--signers 4] [--kill]

measures instead how many blocks N mints take on an anvil making a block per second, with the
worker's default settings (8 threads) and a pool of `--signers` operator signers (the operator
and `fleet chain add-signers` ones): target 200 in <= 10 blocks and 1,000 in <= 40, with 0
duplicates, 0 nonce gaps, 0 reverts; `--kill` SIGKILLs the worker mid-batch and starts another:
still each mint exactly once. Prints the blocks and the mints per signer.
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
from chain import devnet  # noqa: E402
from chain.abi import LOTTERY, encode_call  # noqa: E402
from chain.client import ChainClient  # noqa: E402
from chain.deploy import LotteryConfig, add_signers, deploy_reference  # noqa: E402
from chain.keys import Keyring, new_kek  # noqa: E402
from chain.registry import record_deployment  # noqa: E402
from chain.wallets import EMBEDDED, OPERATOR, SIGNER, signer_pool, store_wallet  # noqa: E402
from shared.config import get_settings  # noqa: E402
from shared.runtime import Runtime, set_runtime  # noqa: E402
from workers.chain_actions import client as chain_actions  # noqa: E402

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
            "workers.chain_actions.app",
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


def worker(env: dict[str, str], threads: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "dramatiq", "workers.chain_actions.app", "--processes", "1"]
    return subprocess.Popen(
        [*argv, "--threads", str(threads)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def mints_in_blocks(args: argparse.Namespace) -> dict[str, Any]:
    """`--blocks`: N mints by the operator on an anvil that makes a block per second, as a chain
    does; how many blocks they took, duplicates, nonce errors, reverts; with `--kill`, the
    worker is SIGKILLed once half of them are done and another one takes over."""
    sandbox = Sandbox(get_settings())
    node = devnet.start_anvil(chain_id=31_337, extra=("--block-time", "1"))
    kek, n = new_kek(), args.actions
    try:
        sandbox.create()
        runtime = Runtime(sandbox.settings)
        set_runtime(runtime)
        client = ChainClient.connect(node.url)
        owner, player = devnet.dev_accounts(2)
        contracts = deploy_reference(client, owner, operator=owner.address)
        lottery = contracts[LOTTERY].address
        from pydantic import SecretStr

        ring = Keyring.from_settings({"bench": SecretStr(kek)}, "bench")
        with psycopg.connect(sandbox.dsn) as conn:
            for deployment in contracts.values():
                record_deployment(conn, node.chain_id, deployment)
            store_wallet(conn, ring, bytes(owner.key), kind=OPERATOR)
            badge = contracts["BlockLuckyPOAP"].address
            for signer in add_signers(client, owner, badge, args.signers - 1):
                store_wallet(conn, ring, bytes(signer.key), kind=SIGNER)
            conn.cursor().executemany(
                "INSERT INTO lottery_tickets (chain_id, contract, tx_hash, log_index,"
                " block_number, round_id, player, ticket_count, amount_wei)"
                " VALUES (%s, %s, %s, 0, 0, %s, %s, 1, %s)",
                [(node.chain_id, lottery, f"0x{i:064x}", i, player.address, TICKET)
                 for i in range(1, n + 1)],
            )  # fmt: skip
        env = sandbox.env(
            CHAIN_RPC_URL=node.url,
            CHAIN_ID=str(node.chain_id),
            CHAIN_KEKS=json.dumps({"bench": kek}),
            CHAIN_KEK_ID="bench",
            LOG_LEVEL="WARNING",
            INDEXER_CONFIRMATIONS="0",
        )
        scope = {"chain_id": node.chain_id, "contract": lottery}
        with psycopg.connect(sandbox.dsn) as conn:
            pool = signer_pool(conn)
        start_nonces = {a: client.nonce(a, "latest") for a in pool}
        jobs = [
            chain_actions.send_mint_badge(
                **scope, round_id=i, player=player.address, runtime=runtime
            ).job_id
            for i in range(1, n + 1)
        ]
        runtime.sender.flush()
        procs = [worker(env, args.threads)]
        killed = False
        deadline = time.monotonic() + args.deadline
        with psycopg.connect(sandbox.dsn, autocommit=True) as conn:
            while True:
                done, dead = conn.execute(
                    "SELECT count(*) FILTER (WHERE status IN ('COMPLETED', 'DEAD')),"
                    " count(*) FILTER (WHERE status = 'DEAD') FROM job_runs WHERE job_id = ANY(%s)",
                    (jobs,),
                ).fetchone() or (0, 0)
                if args.kill and not killed and done >= n // 2:
                    os.killpg(procs[0].pid, signal.SIGKILL)  # mid-batch, transactions in flight
                    procs[0].wait()
                    procs.append(worker(env, args.threads))
                    killed = True
                if done == n or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            rows = conn.execute(
                "SELECT status, count(*), min(block_number), max(block_number),"
                " count(DISTINCT nonce) FROM chain_actions WHERE job_id = ANY(%s) GROUP BY status",
                (jobs,),
            ).fetchall()
            per_signer = dict(
                conn.execute(
                    "SELECT signer, count(*) FROM chain_actions WHERE job_id = ANY(%s)"
                    " AND status = 'CONFIRMED' GROUP BY 1",
                    (jobs,),
                ).fetchall()
            )
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
        confirmed = next((r for r in rows if r[0] == "CONFIRMED"), None)
        badges = int.from_bytes(
            client.call(
                {
                    "to": contracts["BlockLuckyPOAP"].address,
                    "data": encode_call("BlockLuckyPOAP", "balanceOf", player.address),
                }
            )[:32],
            "big",
        )
        sent_by = {a: client.nonce(a, "latest") - n0 for a, n0 in start_nonces.items()}
        sent = sum(sent_by.values())
        runtime.close()
        return {
            "mints": n,
            "threads": args.threads,
            "signers": len(pool),
            "killed_mid_batch": killed,
            "completed": done - dead,
            "dead": dead,
            "blocks": (confirmed[3] - confirmed[2] + 1) if confirmed else None,
            "journal": {r[0]: r[1] for r in rows},
            "badges_minted": badges,
            "transactions_sent": sent,
            "duplicates": sent - badges,
            "reverts": sum(r[1] for r in rows if r[0] != "CONFIRMED"),
            # Per signer: mints journaled CONFIRMED = transactions sent (no gap, no duplicate).
            "per_signer": {
                a: {"mints": per_signer.get(a, 0), "transactions": sent_by[a]} for a in pool
            },
        }
    finally:
        set_runtime(None)
        node.stop()
        sandbox.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--actions", type=int, default=120)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--blocks", action="store_true", help="mints per block (1 s blocks)")
    parser.add_argument("--kill", action="store_true", help="with --blocks: SIGKILL mid-batch")
    parser.add_argument(
        "--signers", type=int, default=4, help="with --blocks: operator signers in the pool"
    )
    parser.add_argument(
        "--deadline", type=float, default=300, help="with --blocks: report after this many s"
    )
    args = parser.parse_args()
    if args.blocks:
        print(json.dumps(mints_in_blocks(args), indent=2))
        return

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
                    chain_actions.send_claim_refund(
                        **scope, round_id=r, payer=p.address, runtime=runtime
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
                chain_actions.send_mint_badge(
                    **scope, round_id=base + i, player=accounts[5].address, runtime=runtime
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
