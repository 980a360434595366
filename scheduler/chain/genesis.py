"""A chain restarted from genesis under the same chain id (a development node started without
its state, same deployer, same contract addresses) is a new chain: what the fleet derived from
the old one must not answer for it.

`check_genesis` compares the node's block 0 with the hash remembered in `chain_genesis`. On the
first sight it only records it; when it changed it resets, in the caller's transaction, that
chain's derived state: the indexer's cursor, block hashes and projections, the indexed actions,
the transaction journal, recorded contracts that have no code any more, and the follow-up runs
(their job ids are archived with the old genesis as a suffix, so the new chain's round 1 can be
sent again while the old runs stay visible). One warning line says so. The caller then releases
the archived ids in the enqueue gate (`EnqueueGate.forget`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog

from chain.client import ChainClient

log = structlog.get_logger("jobfleet.chain.genesis")

#: Tables holding what the indexer derived from one chain, cleared by `chain_id`.
DERIVED = (
    "chain_cursor",
    "indexed_blocks",
    "lottery_tickets",
    "lottery_winners",
    "lottery_cancellations",
    "badges",
    "lottery_rounds",
    "indexed_actions",
    "chain_actions",
)
#: Job ids of the chain actions of one chain (`{TYPE}-{chain_id}-...`).
_JOB_IDS = "^(MINT_BADGE|CLAIM_PRIZE|CLAIM_REFUND)-{chain_id}-"


@dataclass
class GenesisReset:
    chain_id: int
    old: str
    new: str
    rows: dict[str, int] = field(default_factory=dict)
    archived: list[str] = field(default_factory=list)  # job ids freed for the new chain
    contracts_dropped: list[str] = field(default_factory=list)


def genesis_hash(client: ChainClient) -> str:
    block = client.request("eth_getBlockByNumber", ["0x0", False])
    return str(block["hash"]).lower()


def check_genesis(conn: Any, client: ChainClient, chain_id: int) -> GenesisReset | None:
    """None when the node's genesis is the remembered one (or the first one seen)."""
    new = genesis_hash(client)
    conn.execute(
        "INSERT INTO chain_genesis (chain_id, genesis_hash) VALUES (%s, %s)"
        " ON CONFLICT (chain_id) DO NOTHING",
        (chain_id, new),
    )
    row = conn.execute(
        "SELECT genesis_hash FROM chain_genesis WHERE chain_id = %s FOR UPDATE", (chain_id,)
    ).fetchone()
    old = str(row[0])
    if old == new:
        return None
    reset = GenesisReset(chain_id, old, new)
    for table in DERIVED:
        reset.rows[table] = conn.execute(
            f"DELETE FROM {table} WHERE chain_id = %s", (chain_id,)
        ).rowcount
    pattern = _JOB_IDS.format(chain_id=chain_id)
    suffix = f"@genesis:{old[:12]}"
    reset.archived = [
        str(r[0])
        for r in conn.execute(
            "UPDATE job_runs SET job_id = job_id || %s WHERE job_id ~ %s"
            " RETURNING left(job_id, length(job_id) - length(%s))",
            (suffix, pattern, suffix),
        ).fetchall()
    ]
    conn.execute(
        "UPDATE outbox_events SET status = 'FAILED', error = 'GENESIS_CHANGED: ' || %s"
        " WHERE status = 'PENDING' AND job_id ~ %s",
        (old, pattern),
    )
    for name, address in conn.execute(
        "SELECT name, address FROM chain_contracts WHERE chain_id = %s", (chain_id,)
    ).fetchall():
        if client.request("eth_getCode", [address, "latest"]) in ("0x", "0x0", None):
            conn.execute(
                "DELETE FROM chain_contracts WHERE chain_id = %s AND name = %s", (chain_id, name)
            )
            reset.contracts_dropped.append(str(name))
    conn.execute(
        "UPDATE chain_genesis SET genesis_hash = %s, seen_at = now() WHERE chain_id = %s",
        (new, chain_id),
    )
    log.warning(
        "chain.genesis_changed",
        chain_id=chain_id,
        old_genesis=old,
        new_genesis=new,
        reset="derived state of this chain cleared; indexing starts again",
        rows_deleted=sum(reset.rows.values()),
        runs_archived=len(reset.archived),
        contracts_dropped=reset.contracts_dropped,
    )
    return reset
