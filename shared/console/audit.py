"""The console's audit: every action an operator takes in it, in `console_audit`.

Replays are also in `job_replays` and pauses in `pause_audit` (the same records the CLI
writes); this table adds the console's own view: who did what, on what, how many rows, from
which address, including actions those tables do not cover (purges, outbox retries).
"""

from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..runtime import Runtime


def record(
    runtime: Runtime,
    *,
    actor: str,
    action: str,
    target: str = "",
    count: int = 0,
    detail: dict[str, Any] | None = None,
    client: str | None = None,
) -> None:
    with runtime.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        conn.execute(
            "INSERT INTO console_audit (actor, action, target, count, detail, client)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (actor, action, target, count, Jsonb(detail or {}), client),
        )


def recent(runtime: Runtime, *, limit: int = 100) -> list[dict[str, Any]]:
    """The latest actions: the console's own, and pauses/replays done elsewhere (CLI, API)."""
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            """
            (SELECT at, actor, action, target, count, detail, client, 'console' AS source
               FROM console_audit ORDER BY at DESC LIMIT %(n)s)
            UNION ALL
            (SELECT at, actor, action, kind || ' ' || target, 1, jsonb_build_object('reason', reason),
                    NULL, 'pause_audit' FROM pause_audit ORDER BY at DESC LIMIT %(n)s)
            UNION ALL
            (SELECT replayed_at, replayed_by, 'replay', job_id, 1,
                    jsonb_build_object('previous_error_code', previous_error_code), NULL, 'job_replays'
               FROM job_replays ORDER BY replayed_at DESC LIMIT %(n)s)
            ORDER BY at DESC LIMIT %(n)s
            """,
            {"n": limit},
        ).fetchall()
