"""job_runs: the console's keyset indexes break ties on the 16-byte run id, not the job id

Revision ID: 0021_run_index_ids
Revises: 0020_partitioned_runs

Five indexes (0013_console) end with the keyset tiebreaker after `queued_at DESC`: the job id,
a text of about 100 bytes (`{org}:{job}:{entity}:{hash}`). The run's `id` (uuid, 16 bytes,
unique: the primary key is `(id, created_on)`) orders ties just as well. Every write of a run
changes `status`, so each adds an entry to every index: a smaller key is a smaller entry on
every write, and a smaller index. Measured with bench/run_index_write_cost.sql on 300,000 runs
(job ids of 74 bytes; docs/kernel.md, "The run store's indexes"), per update of a run's status:
the WAL records of the four it touches (`dead` holds DEAD runs only) went from 616 to 377
bytes, their full-page images after a checkpoint from 5,024 to 2,194 bytes, the update's
whole WAL from 17,171 to 14,088 bytes (-18 %); the five indexes from 147 to 66 MB.

The readers (the console's Runs and Dead-letters pages, `runs.list_runs`, the job-status API's
list) order by `(queued_at DESC, id DESC)` and their cursors carry the id; the old cursors
(with a job id) are still accepted (`shared/api/queries.py`). Either order of deployment
works: a statement ordered by one tiebreaker on the other index reads it in `queued_at` order
and sorts only the ties (an incremental sort).

Built in the migration's transaction (like 0013_console's): on a large live `job_runs`, writes
wait while they build (2.3 s for the five on 300,000 runs here). To avoid that, build each by
hand first, for each name and key below: `CREATE INDEX <name>_new ON ONLY job_runs <key>`, for
each partition `CREATE INDEX CONCURRENTLY ... ON <partition> <key>` and `ALTER INDEX <name>_new
ATTACH PARTITION ...`, then `DROP INDEX <name>` and `ALTER INDEX <name>_new RENAME TO <name>`:
the migration leaves a valid index whose key is already the new one (an invalid one, a
partition still without its index, is built again). The downgrade builds the old
keys again.
"""

from __future__ import annotations

from alembic import op

revision = "0021_run_index_ids"
down_revision = "0020_partitioned_runs"
branch_labels = None
depends_on = None

#: Each index: its key with the job id (before), its key with the run id (after).
INDEXES = {
    "ix_job_runs_console_recent": "(queued_at DESC, {} DESC)",
    "ix_job_runs_console_org": "(org_id, queued_at DESC, {} DESC)",
    "ix_job_runs_console_job": "(job_name, queued_at DESC, {} DESC)",
    "ix_job_runs_console_status": "(status, queued_at DESC, {} DESC)",
    "ix_job_runs_console_dead": (
        "(queued_at DESC, {} DESC) INCLUDE (error_code, queue, job_name, org_id)"
        " WHERE status = 'DEAD'"
    ),
}

#: The key columns of a valid index (`job_id` or `id` last), as Postgres prints them. A
#: partitioned index is valid once every partition has its own attached.
KEYS = """
SELECT array_agg(pg_get_indexdef(x.indexrelid, k, true) ORDER BY k)
  FROM pg_index x, generate_series(1, x.indnkeyatts) AS k
 WHERE x.indexrelid = to_regclass(%(name)s) AND x.indisvalid
"""


def _rebuild(tiebreaker: str) -> None:
    bind = op.get_bind()
    for name, key in INDEXES.items():
        keys = bind.exec_driver_sql(KEYS, {"name": name}).scalar()
        if keys and keys[-1] == tiebreaker:
            continue  # built by hand already (and valid: on every partition)
        op.execute(f"DROP INDEX IF EXISTS {name}")
        # On the partitioned table: built on every partition, and on each one created later.
        op.execute(f"CREATE INDEX {name} ON job_runs {key.format(tiebreaker)}")


def upgrade() -> None:
    _rebuild("id")


def downgrade() -> None:
    _rebuild("job_id")
