"""run stats: per-minute rollups of finished runs, the console's charts (issue 32)

Revision ID: 0018_run_stats
Revises: 0017_console_search

The Charts page shows runs finished per queue and per state, and send->start and duration
percentiles, over the last hour or day. Read from `job_runs`, a day is as many rows as runs
finished that day (8.6 million at 100 jobs/s); rolled up, it is a few rows a minute, written
once a minute by the scheduler's `run-stats` job (`shared/run_stats.py`), never on a run's own
write path.

- `run_stats`: runs finished per minute, queue and status (COMPLETED, DEAD, CANCELED).
- `run_latency`: per minute, queue and kind (`wait`: queued -> first start; `run`: started ->
  finished), how many runs fell in each logarithmic bucket (3 a doubling of milliseconds: a
  percentile to within 12 %); only the buckets that occur have a row.
- both at two widths (`span`, minutes): 1 (the last hour's chart) and 15 (the last day's: 96
  bins read, not 1,440).
- `run_stats_watermark`: one row, up to when `job_runs` has been rolled up (the charts read
  the minutes after it live from `job_runs`).
"""

from __future__ import annotations

from alembic import op

revision = "0018_run_stats"
down_revision = "0017_console_search"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE run_stats (
            span    smallint     NOT NULL,
            minute  timestamptz  NOT NULL,
            queue   varchar(100) NOT NULL,
            status  varchar(16)  NOT NULL,
            runs    integer      NOT NULL,
            PRIMARY KEY (span, minute, queue, status)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE run_latency (
            span    smallint     NOT NULL,
            minute  timestamptz  NOT NULL,
            queue   varchar(100) NOT NULL,
            kind    varchar(8)   NOT NULL,
            bucket  smallint     NOT NULL,
            runs    integer      NOT NULL,
            PRIMARY KEY (span, minute, queue, kind, bucket)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE run_stats_watermark (
            id    boolean     PRIMARY KEY DEFAULT true CHECK (id),
            upto  timestamptz NOT NULL
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE run_stats_watermark")
    op.execute("DROP TABLE run_latency")
    op.execute("DROP TABLE run_stats")
