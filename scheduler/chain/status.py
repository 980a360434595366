"""What the scheduler's chain work looks like from outside: the indexer's cursor and lag, the
keeper's last action and who holds its lock (`fleet chain status`), and the indexer section of
`fleet status` (`indexer_section`, the scheduler's `Domain.status`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .indexer import CURSOR

if TYPE_CHECKING:
    from shared.config import Settings


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


def indexer_section(settings: Settings, metrics: str | None = None) -> dict[str, Any]:
    """`fleet status`'s indexer section: the newest cursor, the node's head and the lag.

    Without a node answering, the lag the scheduler last reported (`jobfleet_indexer_lag_blocks`
    in `metrics`, the fleet's scraped metrics text) is shown instead."""
    import psycopg

    from chain.settings import chain_settings

    with psycopg.connect(settings.database_dsn, connect_timeout=2, autocommit=True) as conn:
        try:
            row = conn.execute(
                "SELECT chain_id, block_number FROM chain_cursor ORDER BY updated_at DESC LIMIT 1"
            ).fetchone()
        except psycopg.errors.UndefinedTable:
            return {
                "cursor": None,
                "head": None,
                "lag": None,
                "note": "not migrated (fleet db upgrade)",
            }
    if row is None:
        return {"cursor": None, "head": None, "lag": None, "note": "the indexer has no cursor yet"}
    head: int | None = None
    try:
        from chain.client import ChainClient

        head = ChainClient.connect(chain_settings().rpc_url, timeout_s=2).block_number()
    except Exception:
        reported = _reported_lag(metrics) if metrics else []
        if reported:
            return {"cursor": row[1], "head": None, "lag": int(max(reported))}
    lag = None if head is None else max(0, head - int(row[1]))
    return {"chain_id": row[0], "cursor": row[1], "head": head, "lag": lag}


def _reported_lag(metrics: str) -> list[float]:
    from shared.cli.status import parse_metrics

    return [value for _, value in parse_metrics(metrics, "jobfleet_indexer_lag_blocks")]
