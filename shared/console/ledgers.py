"""The small tables beside the runs: the outbox, email suppressions, AI cost per org and day,
chain actions and the lottery keeper's passes. Each read is bounded; a table that this database
does not have (a domain not migrated) shows as absent, not as an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from ..observability.logging import redact
from ..runtime import Runtime


def present(runtime: Runtime, *tables: str) -> dict[str, bool]:
    with runtime.pool.connection() as conn:
        rows = conn.execute(
            "SELECT t, to_regclass(t) IS NOT NULL FROM unnest(%s::text[]) AS t", (list(tables),)
        ).fetchall()
    return {t: bool(ok) for t, ok in rows}


def _rows(runtime: Runtime, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql, params).fetchall()


def _orgs(orgs: Sequence[UUID], column: str = "org_id") -> tuple[str, list[Any]]:
    return (f" AND {column} = ANY(%s)", [list(orgs)]) if orgs else ("", [])


def outbox_events(
    runtime: Runtime, status: str, *, orgs: Sequence[UUID] = (), limit: int = 100
) -> list[dict[str, Any]]:
    """PENDING (oldest due first) or FAILED (latest first) events, with their last error."""
    scope, params = _orgs(orgs)
    order = "next_attempt_at" if status == "PENDING" else "created_at DESC"
    rows = _rows(
        runtime,
        "SELECT id, org_id, type, job_name, job_id, payload, status, attempts, next_attempt_at,"
        " created_at, error FROM outbox_events WHERE status = %s"
        f"{scope} ORDER BY {order} LIMIT %s",
        [status, *params, limit],
    )
    for row in rows:
        row["payload"] = redact(row["payload"])
    return rows


def retry_outbox(runtime: Runtime, ids: Sequence[UUID], *, orgs: Sequence[UUID] = ()) -> int:
    """Due now: PENDING events wait no longer, FAILED ones are PENDING again with their attempts
    reset (the relay publishes them at its next pass; the error stays until then)."""
    scope, params = _orgs(orgs)
    with runtime.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        cur = conn.execute(
            "UPDATE outbox_events SET status = 'PENDING', next_attempt_at = now(),"
            " attempts = CASE WHEN status = 'FAILED' THEN 0 ELSE attempts END,"
            " locked_by = NULL, locked_at = NULL"
            f" WHERE id = ANY(%s) AND status IN ('PENDING', 'FAILED'){scope}",
            [list(ids), *params],
        )
        changed = cur.rowcount
        conn.execute("NOTIFY jobfleet_outbox")  # wake a relay that listens
    return changed


def suppressions(
    runtime: Runtime, *, orgs: Sequence[UUID] = (), limit: int = 100
) -> list[dict[str, Any]]:
    scope, params = _orgs(orgs)
    return _rows(
        runtime,
        "SELECT org_id, email, reason, detail, created_at FROM email_suppressions"
        f" WHERE TRUE{scope} ORDER BY created_at DESC LIMIT %s",
        [*params, limit],
    )


def ai_cost(runtime: Runtime, *, orgs: Sequence[UUID] = (), days: int = 14) -> list[dict[str, Any]]:
    scope, params = _orgs(orgs)
    return _rows(
        runtime,
        "SELECT day, org_id, sum(requests) AS requests, sum(tokens_in) AS tokens_in,"
        " sum(tokens_out) AS tokens_out, sum(cost) AS cost, string_agg(DISTINCT model, ', ') AS models"
        " FROM ai_usage WHERE day >= current_date - %s"
        f"{scope} GROUP BY day, org_id ORDER BY day DESC, cost DESC LIMIT 500",
        [days, *params],
    )


def chain_actions(runtime: Runtime, *, limit: int = 50) -> list[dict[str, Any]]:
    return _rows(
        runtime,
        "SELECT job_id, type, round_id, address, status, nonce, tx_hash, error_code, error, attempts,"
        " created_at, updated_at, confirmed_at FROM chain_actions ORDER BY updated_at DESC LIMIT %s",
        [limit],
    )


def chain_action_counts(runtime: Runtime) -> list[dict[str, Any]]:
    return _rows(
        runtime,
        "SELECT type, status, count(*) AS n FROM chain_actions GROUP BY 1, 2 ORDER BY 1, 2",
        [],
    )


def keeper(runtime: Runtime, *, limit: int = 20) -> list[dict[str, Any]]:
    return _rows(
        runtime,
        "SELECT ran_at, chain_id, contract, holder, outcome, round_id, tx_hash, error"
        " FROM keeper_actions ORDER BY ran_at DESC LIMIT %s",
        [limit],
    )
