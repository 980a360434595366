"""The indexes of `job_runs`: each one pays for itself.

Every write of a run (QUEUED, its start, its outcome) changes `status`, so none is a heap-only
update and each adds an entry to every index of the table: about half of Postgres's CPU per
START and FINISH row (bench/README.md, issue 24). An index that another already serves is pure
cost (migration 0015_run_indexes).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import psycopg
import pytest
from alembic import command

from shared.config import Settings
from shared.db.connect import connect_kwargs
from shared.db.migrate import alembic_config, upgrade
from tests.support.scratch_db import scratch_database

#: Key columns (with their order), predicate and uniqueness of each index of job_runs.
INDEXES = """
SELECT c.relname,
       ARRAY(SELECT pg_get_indexdef(i.indexrelid, k, TRUE)
               FROM generate_series(1, i.indnkeyatts) AS k ORDER BY k) AS keys,
       COALESCE(pg_get_expr(i.indpred, i.indrelid), '') AS predicate,
       i.indisunique
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'public.job_runs'::regclass
"""


def test_no_index_of_job_runs_is_the_leading_part_of_another(db: psycopg.Connection[Any]) -> None:
    """An index whose key columns lead another index's, under the same predicate, finds nothing
    the other does not (`ix_job_runs_finished` was `ix_job_runs_finished_at_job` without its
    INCLUDE columns) and costs an entry per write of every run."""
    indexes = db.execute(INDEXES).fetchall()
    assert len(indexes) > 5, indexes
    redundant = [
        (name, other)
        for name, keys, predicate, unique in indexes
        for other, other_keys, other_predicate, _ in indexes
        if name != other
        and not unique
        and predicate == other_predicate
        and list(other_keys[: len(keys)]) == list(keys)
    ]
    assert redundant == [], f"(index, the index that already serves it): {redundant}"


@pytest.mark.skipif(
    os.environ.get("DATABASE_POOLER") == "transaction",
    reason="a session's temporary table: a transaction-mode pooler runs each statement on any "
    "server connection",
)
def test_the_runs_of_an_entity_are_found_by_index(db: psycopg.Connection[Any]) -> None:
    """`ix_job_runs_entity` (entity_type, entity_id) went: the entity id index finds an
    entity's runs, by the product's job-status API (org, entity type and id) and by the
    kernel's `runs.list_runs` (entity id), on a table of many entities."""
    org = uuid.uuid4()
    db.execute("CREATE TEMP TABLE job_runs (LIKE public.job_runs INCLUDING ALL)")
    try:
        db.execute(
            "INSERT INTO job_runs (org_id, job_name, job_id, queue, status, entity_type,"
            " entity_id, queued_at)"
            " SELECT %s, 'idx.job', 'idx:' || g, 'default', 'COMPLETED', 'invoice',"
            "        'inv-' || (g %% 5000), now() - g * interval '1 s'"
            "   FROM generate_series(1, 20000) g",
            (org,),
        )
        db.execute("ANALYZE job_runs")
        queries = {
            "api page": (
                "SELECT job_id FROM job_runs WHERE org_id = %s AND entity_type = %s"
                " AND entity_id = %s ORDER BY queued_at DESC, id DESC LIMIT 51",
                (org, "invoice", "inv-42"),
            ),
            "runs.list_runs": (
                "SELECT job_id FROM job_runs WHERE TRUE AND entity_id = %s"
                " ORDER BY queued_at DESC, id DESC LIMIT 50",
                ("inv-42",),
            ),
        }
        for what, (query, params) in queries.items():
            plan = "\n".join(
                str(row[0]) for row in db.execute(f"EXPLAIN {query}", params).fetchall()
            )
            # (The temporary table's indexes have names of Postgres's making.)
            assert "Seq Scan" not in plan and "Cond: (entity_id =" in plan, f"{what}:\n{plan}"
            found = db.execute(query, params).fetchall()
            assert len(found) == 4, (what, found)
    finally:
        db.execute("DROP TABLE pg_temp.job_runs")


def _recent(conn: psycopg.Connection[Any]) -> tuple[int, str, bool]:
    row = conn.execute(
        "SELECT x.indexrelid::int, pg_get_indexdef(x.indexrelid), x.indisvalid FROM pg_index x"
        " WHERE x.indexrelid = 'ix_job_runs_console_recent'::regclass"
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def test_a_keyset_index_built_by_hand_is_kept_and_a_partial_build_is_redone(
    settings: Settings,
) -> None:
    """Migration 0021_run_index_ids's by-hand route on a live table: the new index built on
    each partition `CONCURRENTLY`, attached, renamed; the migration then leaves it. One whose
    partitions are not all indexed (invalid) is built again."""
    with scratch_database(settings, "run_indexes") as scratch:
        upgrade(scratch.url, "heads")
        cfg = alembic_config(scratch.url)
        command.downgrade(cfg, "0020_partitioned_runs")
        with psycopg.connect(scratch.dsn, autocommit=True, **connect_kwargs(settings)) as conn:
            conn.execute("CREATE INDEX recent_new ON ONLY job_runs (queued_at DESC, id DESC)")
            parts = [
                r[0]
                for r in conn.execute(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                    " WHERE i.inhparent = 'job_runs'::regclass ORDER BY 1"
                )
            ]
            for part in parts:
                conn.execute(
                    f"CREATE INDEX CONCURRENTLY {part}_rn ON {part} (queued_at DESC, id DESC)"
                )
                conn.execute(f"ALTER INDEX recent_new ATTACH PARTITION {part}_rn")
            conn.execute("DROP INDEX ix_job_runs_console_recent")
            conn.execute("ALTER INDEX recent_new RENAME TO ix_job_runs_console_recent")
            by_hand = _recent(conn)
            assert by_hand[2] and "id DESC)" in by_hand[1] and "job_id" not in by_hand[1]

            command.upgrade(cfg, "heads")
            assert _recent(conn) == by_hand

            # Half done: the parent index without its partitions' (invalid).
            command.downgrade(cfg, "0020_partitioned_runs")
            conn.execute("DROP INDEX ix_job_runs_console_recent")
            conn.execute(
                "CREATE INDEX ix_job_runs_console_recent ON ONLY job_runs (queued_at DESC, id DESC)"
            )
            half = _recent(conn)
            assert not half[2]

            command.upgrade(cfg, "heads")
            redone = _recent(conn)
            assert redone[0] != half[0] and redone[2] and "id DESC)" in redone[1]
