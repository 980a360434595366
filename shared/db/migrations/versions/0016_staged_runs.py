"""Runs staged in the producer's transaction: a version per run, scheduled outbox events

Revision ID: 0016_staged_runs
Revises: 0015_run_indexes

- `job_runs.version`: bumped by a trigger on every UPDATE of a run, so each state a run goes
  through has a number that only grows. The status API's Server-Sent Events use it as their
  `id:` (a reconnecting `EventSource` sends it back as `Last-Event-ID` and resumes after it).
  A trigger, not each statement, so that no writer (run writer, cancel, replay, maintenance)
  can forget it.
- `outbox_events.deliver_at`: a staged job's `scheduled_at` / delay; the relay publishes the
  event at once and the broker holds the message until then.
- `ix_outbox_events_pending_job`: a STAGED run's cancel finds its pending events by job id.
The STAGED run status and the CANCELED outbox status need no schema change (statuses are
strings; shared/jobs/statuses.py has the closed vocabularies).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_staged_runs"
down_revision = "0015_run_indexes"
branch_labels = None
depends_on = None

FUNCTION = """
CREATE OR REPLACE FUNCTION jobfleet_run_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END $$
"""


def upgrade() -> None:
    op.add_column(
        "job_runs", sa.Column("version", sa.BigInteger(), nullable=False, server_default="1")
    )
    op.execute(FUNCTION)
    op.execute(
        "CREATE TRIGGER job_runs_version BEFORE UPDATE ON job_runs "
        "FOR EACH ROW EXECUTE FUNCTION jobfleet_run_version()"
    )
    op.add_column("outbox_events", sa.Column("deliver_at", sa.DateTime(timezone=True)))
    op.create_index(
        "ix_outbox_events_pending_job",
        "outbox_events",
        ["job_id"],
        postgresql_where=sa.text("status = 'PENDING'"),
    )


def downgrade() -> None:
    op.drop_index("ix_outbox_events_pending_job", table_name="outbox_events")
    op.drop_column("outbox_events", "deliver_at")
    op.execute("DROP TRIGGER IF EXISTS job_runs_version ON job_runs")
    op.execute("DROP FUNCTION IF EXISTS jobfleet_run_version()")
    op.drop_column("job_runs", "version")
