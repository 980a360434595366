"""email: feedback loop (issue 22): BOUNCED emails from delivery status notifications, the
inbound messages kept for inspection, opens and clicks, the org's tracking switch, provider
(SES via SNS) events seen

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

    # Opens (the first per email) and clicks (each), with the time and the user agent.
    op.create_table(
        "email_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("email_id", sa.UUID(), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),  # open | click
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("user_agent", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_email_events"),
    )
    op.create_index("ix_email_events_email", "email_events", ["email_id", "kind"])
    op.create_index(
        "uq_email_events_first_open",
        "email_events",
        ["email_id"],
        unique=True,
        postgresql_where=sa.text("kind = 'open'"),
    )
    # An org that turned tracking off: none of its emails is tracked, whatever the template.
    op.create_table(
        "email_org_settings",
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("tracking", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("org_id", name="pk_email_org_settings"),
    )
    # SNS MessageIds already taken (a replay is refused); SES events find emails by Message-ID.
    op.create_table(
        "email_provider_events",
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("message_id", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("provider", "message_id", name="pk_email_provider_events"),
    )
    op.add_column(
        "scheduled_emails", sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index(
        "ix_scheduled_emails_message_id",
        "scheduled_emails",
        ["message_id"],
        postgresql_where=sa.text("message_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_scheduled_emails_message_id", table_name="scheduled_emails")
    op.drop_column("scheduled_emails", "delivered_at")
    op.drop_table("email_provider_events")
    op.drop_table("email_org_settings")
    op.drop_table("email_events")
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
