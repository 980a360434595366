"""The small tables beside the runs: the outbox (its events, retry now), and the helpers the
domains' console modules read their own tables with (`plugins.py`). Each read is bounded; a
table that this database does not have (a domain not migrated) shows as absent, not as an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from ..observability.logging import redact
from ..runtime import Runtime


def present(runtime: Runtime, *tables: str) -> dict[str, bool]:
    """Which of these tables this database has."""
    with runtime.pool.connection() as conn:
        found = conn.execute(
            "SELECT t, to_regclass(t) IS NOT NULL FROM unnest(%s::text[]) AS t", (list(tables),)
        ).fetchall()
    return {t: bool(ok) for t, ok in found}


def rows(runtime: Runtime, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    """One read (bound it: `LIMIT`), each row a dict."""
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql, params).fetchall()


def org_scope(orgs: Sequence[UUID], column: str = "org_id") -> tuple[str, list[Any]]:
    """`(" AND org_id = ANY(%s)", [orgs])` to append to a WHERE clause; nothing for every org."""
    return (f" AND {column} = ANY(%s)", [list(orgs)]) if orgs else ("", [])


def outbox_events(
    runtime: Runtime, status: str, *, orgs: Sequence[UUID] = (), limit: int = 100
) -> list[dict[str, Any]]:
    """PENDING (oldest due first) or FAILED (latest first) events, with their last error."""
    scope, params = org_scope(orgs)
    order = "next_attempt_at" if status == "PENDING" else "created_at DESC"
    found = rows(
        runtime,
        "SELECT id, org_id, type, job_name, job_id, payload, status, attempts, next_attempt_at,"
        " created_at, error FROM outbox_events WHERE status = %s"
        f"{scope} ORDER BY {order} LIMIT %s",
        [status, *params, limit],
    )
    for row in found:
        row["payload"] = redact(row["payload"])
    return found


def retry_outbox(runtime: Runtime, ids: Sequence[UUID], *, orgs: Sequence[UUID] = ()) -> int:
    """Due now: PENDING events wait no longer, FAILED ones are PENDING again with their attempts
    reset (the relay publishes them at its next pass; the error stays until then)."""
    scope, params = org_scope(orgs)
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
