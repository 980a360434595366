"""What `fleet chain status` says about the scheduler's chain work: the indexer's cursor and lag,
the keeper's last action and who holds its lock."""

from __future__ import annotations

from typing import Any

from .indexer import CURSOR


def indexer_status(conn: Any, chain_id: int, head: int) -> dict[str, Any]:
    row = conn.execute(
        "SELECT block_number, updated_at FROM chain_cursor WHERE name = %s AND chain_id = %s",
        (CURSOR, chain_id),
    ).fetchone()
    if row is None:
        return {"indexer_cursor": None, "indexer_lag_blocks": None, "indexer_updated_at": None}
    cursor = int(row[0])
    status: dict[str, Any] = {
        "indexer_cursor": cursor,
        "indexer_lag_blocks": max(0, head - cursor),
        "indexer_updated_at": row[1].isoformat(),
    }
    if cursor > head:
        # Not "lag 0": the node is behind what was indexed (restarted without its state, a
        # reorg to a shorter chain, another node behind a load balancer).
        status["indexer_lag_blocks"] = None
        status["indexer_warning"] = (
            f"cursor {cursor} is {cursor - head} block(s) ahead of the chain head {head}:"
            " the node lost blocks the indexer has seen"
        )
    return status


def keeper_status(conn: Any, chain_id: int, redis_client: Any, lock_key: str) -> dict[str, Any]:
    row = conn.execute(
        "SELECT outcome, round_id, tx_hash, ran_at FROM keeper_actions WHERE chain_id = %s"
        " ORDER BY ran_at DESC, id DESC LIMIT 1",
        (chain_id,),
    ).fetchone()
    last = (
        None
        if row is None
        else f"{row[0]} round={row[1]} tx={row[2] or '-'} at={row[3].isoformat()}"
    )
    try:
        holder = redis_client.get(lock_key)
        lock = holder.decode() if holder else "(free)"
    except Exception as exc:  # status must answer with Redis down
        lock = f"(unknown: {type(exc).__name__})"
    return {"keeper_last_action": last, "keeper_lock_holder": lock}
