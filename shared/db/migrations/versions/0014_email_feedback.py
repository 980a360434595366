"""email: feedback loop (issue 22): BOUNCED emails from delivery status notifications, and the
inbound messages kept for inspection

Revision ID: 0014_email_feedback
Revises: 0010_email
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_email_feedback"
down_revision = "0010_email"
branch_labels = None
depends_on = None

BEFORE = "'SCHEDULED', 'QUEUED', 'SENDING', 'SENT', 'FAILED', 'UNCONFIRMED', 'CANCELED'"
AFTER = BEFORE + ", 'BOUNCED'"


def upgrade() -> None:
    # BOUNCED: the server accepted the message, and a DSN (RFC 3464) said later that it failed.
    _status_check(AFTER)
    op.add_column(
        "scheduled_emails", sa.Column("bounced_at", sa.DateTime(timezone=True), nullable=True)
    )
    # Inbound mail the listener could not use (not a DSN, no known email, a broken report):
    # kept whole for an operator, never lost, never retried.
    op.create_table(
        "email_inbound_kept",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("mail_from", sa.Text(), nullable=False),
        sa.Column("rcpt_to", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_email_inbound_kept"),
    )


def downgrade() -> None:
    op.drop_table("email_inbound_kept")
    op.drop_column("scheduled_emails", "bounced_at")
    op.execute("UPDATE scheduled_emails SET status = 'FAILED' WHERE status = 'BOUNCED'")
    _status_check(BEFORE)


def _status_check(statuses: str) -> None:
    # Raw SQL, by its actual name: 0002 created it through the metadata's naming convention
    # (`ck_<table>_<name>` around a name that already said so).
    name = "ck_scheduled_emails_ck_scheduled_emails_status"
    op.execute(
        f"ALTER TABLE scheduled_emails DROP CONSTRAINT {name},"
        f" ADD CONSTRAINT {name} CHECK (status IN ({statuses}))"
    )
