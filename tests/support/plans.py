"""Which indexes a statement's plan uses, named as on the table the statement names: a partition's
index (`job_runs_p20261204_payload_idx`) counts as its partitioned parent's (`job_runs` is
partitioned by day: docs/kernel.md)."""

from __future__ import annotations

from typing import Any

import psycopg

PARENT_INDEX = """
SELECT c.relname, COALESCE(p.relname, c.relname)
  FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
  LEFT JOIN pg_class p ON p.oid = i.inhparent
 WHERE c.relkind IN ('i', 'I')
"""


def indexes_used(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> set[str]:
    """The indexes (their parents' names) that `EXPLAIN sql` reads, with an index condition or
    not."""
    parents = dict(conn.execute(PARENT_INDEX).fetchall())
    plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()[0]  # type: ignore[index]
    found: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        if "Index Name" in node:
            found.add(parents.get(node["Index Name"], node["Index Name"]))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return found
