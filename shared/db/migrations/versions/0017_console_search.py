"""console search: inverted indexes for the Runs search line (payload fields, error text)

Revision ID: 0017_console_search
Revises: 0016_staged_runs

The console's search line (shared/console/query.py) finds runs by a payload field
(`payload.to:"a@example.com"`, a JSONB containment `payload @> ...`) and by words of the error
text (`ILIKE '%refused%'`). Neither is a B-tree's: without these, each is a sequential scan
of the whole table (bench/console.py measures both ways: docs/console.md).

- `ix_job_runs_console_payload`: GIN with `jsonb_path_ops` (one hash per path-and-value; about
  a third of the default `jsonb_ops`'s size, and it serves `@>`, the only operator the search
  uses). Oban indexes its `args` the same way (GIN) for Oban Web's search.
- `ix_job_runs_console_error`: GIN trigram (`pg_trgm`, a contrib extension shipped with
  Postgres and trusted since 13: a database owner may create it) on the error text, only where
  there is one: the completed runs, most of them, cost it nothing. A server without `pg_trgm`
  gets no such index: the error-text search still works, by scanning.

The cost, on writes: every update of a run changes its `status` (indexed), so it is never a
HOT update and adds an entry to every index, these two included (GIN batches its entries in a
pending list, `fastupdate`, merged by autovacuum). Built in the migration's transaction as
0013_console's are; on a large live table create them `CONCURRENTLY` by hand first (the
migration skips an index that exists).
"""

from __future__ import annotations

from alembic import op

revision = "0017_console_search"
down_revision = "0016_staged_runs"
branch_labels = None
depends_on = None

PAYLOAD = "ix_job_runs_console_payload"
ERROR = "ix_job_runs_console_error"


def upgrade() -> None:
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {PAYLOAD} ON job_runs USING gin (payload jsonb_path_ops)"
    )
    bind = op.get_bind()
    available = bind.exec_driver_sql(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'"
    ).first()
    if available is None:
        return
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {ERROR} ON job_runs USING gin (error gin_trgm_ops)"
        " WHERE error IS NOT NULL"
    )


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {ERROR}")
    op.execute(f"DROP INDEX IF EXISTS {PAYLOAD}")
    # pg_trgm stays: other objects of the database may use it.
