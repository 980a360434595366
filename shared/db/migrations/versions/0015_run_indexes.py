"""job_runs: drop two indexes that others already serve

Revision ID: 0015_run_indexes
Revises: 0013_console

Every write of a run (its QUEUED insert, its start, its outcome) changes `status`, so none is a
heap-only update: each adds an entry to every index of `job_runs`. Measured (bench/README.md,
issue 24): the secondary indexes are about half of Postgres's CPU per START and FINISH row.
Two of them held nothing another index does not:
- `ix_job_runs_finished` (finished_at) WHERE finished_at IS NOT NULL: the same key and the same
  predicate as `ix_job_runs_finished_at_job` (0013_console), which also INCLUDEs the columns
  the Overview reads. Every query that used it (retention, the dead-letter purge, the rate per
  minute) uses that one.
- `ix_job_runs_entity` (entity_type, entity_id): every query on an entity names its entity id,
  and `ix_job_runs_console_entity` (entity_id) finds its runs (a few per entity) whatever the
  entity type; the type is then a filter on those rows.
On a large live table `DROP INDEX` waits for the queries in flight and blocks writes meanwhile
(briefly: dropping is not building); drop them `CONCURRENTLY` by hand first to avoid even that
(the migration skips an index that is gone). The downgrade builds them again.
"""

from __future__ import annotations

from alembic import op

revision = "0015_run_indexes"
down_revision = "0013_console"
branch_labels = None
depends_on = None

DROPPED = {
    "ix_job_runs_finished": "(finished_at) WHERE finished_at IS NOT NULL",
    "ix_job_runs_entity": "(entity_type, entity_id)",
}


def upgrade() -> None:
    for name in DROPPED:
        op.execute(f"DROP INDEX IF EXISTS {name}")


def downgrade() -> None:
    for name, columns in DROPPED.items():
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON job_runs {columns}")
