"""email: deferral tracking on scheduled_emails (issue 16: 4xx retried over hours)

Revision ID: 0010_email
Revises: 0002_email
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_email"
down_revision = "0002_email"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # When the current run of 4xx replies / connection failures began, and how many so far:
    # the outage window is measured from `deferred_since`, the next wait from `deferrals`.
    op.add_column(
        "scheduled_emails", sa.Column("deferred_since", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "scheduled_emails",
        sa.Column("deferrals", sa.Integer(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("scheduled_emails", "deferrals")
    op.drop_column("scheduled_emails", "deferred_since")
