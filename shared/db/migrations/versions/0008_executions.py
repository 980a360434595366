"""executions: every start of a run on the record, and the lease it runs under

Revision ID: 0008_executions
Revises: 0001

- `job_executions`: one row per start of a run (execution number, attempt, worker, message,
  start time): a second execution of a job (a stalled worker's job taken over, a crash) leaves
  a trace.
- `job_runs.executions`: how many times the run was started.
- `job_runs.lease_owner` / `lease_until`: the worker running it and until when; renewed by that
  worker while it runs, so a delivery that finds a live lease held by another worker waits.
"""

from __future__ import annotations

from alembic import op

revision = "0008_executions"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE job_runs ADD COLUMN executions integer NOT NULL DEFAULT 0, "
        "ADD COLUMN lease_owner text, ADD COLUMN lease_until timestamptz"
    )
    op.execute(
        """
        CREATE TABLE job_executions (
            id          bigserial PRIMARY KEY,
            job_id      text        NOT NULL,
            execution   integer     NOT NULL,
            attempt     integer     NOT NULL,
            worker      text        NOT NULL,
            message_id  text,
            started_at  timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX ix_job_executions_job_id ON job_executions (job_id, execution)")


def downgrade() -> None:
    op.execute("DROP TABLE job_executions")
    op.execute(
        "ALTER TABLE job_runs DROP COLUMN executions, DROP COLUMN lease_owner, "
        "DROP COLUMN lease_until"
    )
