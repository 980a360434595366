"""email: scheduled emails, sequences and suppressions (issue 3)

Revision ID: 0002_email
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002_email"
down_revision = "0001"
branch_labels = None
depends_on = None

EMAIL_STATUSES = "'SCHEDULED', 'QUEUED', 'SENDING', 'SENT', 'FAILED', 'UNCONFIRMED', 'CANCELED'"
SEQUENCE_STATUSES = "'ACTIVE', 'COMPLETED', 'STOPPED'"


def _timestamps() -> list[sa.Column[object]]:
    return [
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
    ]


def upgrade() -> None:
    op.create_table(
        "email_sequences",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("recipient_email", sa.String(320), nullable=False),
        sa.Column("recipient_name", sa.String(200), nullable=True),
        sa.Column("lang", sa.String(5), nullable=False),
        sa.Column(
            "variables", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.Column("reply_to", sa.String(320), nullable=True),
        # [{"template_key": ..., "delay_s": ...}]: step N+1 is due delay_s after step N was sent.
        sa.Column("steps", postgresql.JSONB(), nullable=False),
        sa.Column("status", sa.String(16), server_default="ACTIVE", nullable=False),
        sa.Column("current_step", sa.Integer(), server_default="0", nullable=False),
        sa.Column("stop_reason", sa.String(32), nullable=True),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id", name="pk_email_sequences"),
        sa.CheckConstraint(f"status IN ({SEQUENCE_STATUSES})", name="ck_email_sequences_status"),
    )
    op.create_index(
        "ix_email_sequences_recipient",
        "email_sequences",
        ["org_id", sa.text("lower(recipient_email)")],
    )
    op.create_table(
        "scheduled_emails",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("template_key", sa.String(100), nullable=False),
        sa.Column("lang", sa.String(5), nullable=False),
        sa.Column("recipient_email", sa.String(320), nullable=False),
        sa.Column("recipient_name", sa.String(200), nullable=True),
        sa.Column(
            "cc", postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'"), nullable=False
        ),
        sa.Column(
            "variables", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.Column("reply_to", sa.String(320), nullable=True),
        sa.Column("status", sa.String(16), server_default="SCHEDULED", nullable=False),
        sa.Column(
            "send_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("sequence_id", sa.UUID(), nullable=True),
        sa.Column("sequence_step", sa.Integer(), nullable=True),
        # The SMTP Message-ID (derived from the job id) and what the server answered.
        sa.Column("message_id", sa.String(255), nullable=True),
        sa.Column("smtp_reply", sa.Text(), nullable=True),
        # Recipients the server refused while accepting the others: {address: "550 ..."}.
        sa.Column("refused", postgresql.JSONB(), nullable=True),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("sending_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id", name="pk_scheduled_emails"),
        sa.ForeignKeyConstraint(
            ["sequence_id"],
            ["email_sequences.id"],
            name="fk_scheduled_emails_sequence",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint(
            "sequence_id", "sequence_step", name="uq_scheduled_emails_sequence_step"
        ),
        sa.CheckConstraint(f"status IN ({EMAIL_STATUSES})", name="ck_scheduled_emails_status"),
    )
    op.create_index("ix_scheduled_emails_org_id", "scheduled_emails", ["org_id"])
    op.create_index(
        "ix_scheduled_emails_due",
        "scheduled_emails",
        ["send_at"],
        postgresql_where=sa.text("status = 'SCHEDULED'"),
    )
    op.create_table(
        "email_suppressions",
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),  # lower-case
        sa.Column("reason", sa.String(16), nullable=False),  # UNSUBSCRIBED | BOUNCED
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("org_id", "email", name="pk_email_suppressions"),
    )


def downgrade() -> None:
    op.drop_table("email_suppressions")
    op.drop_index("ix_scheduled_emails_due", table_name="scheduled_emails")
    op.drop_index("ix_scheduled_emails_org_id", table_name="scheduled_emails")
    op.drop_table("scheduled_emails")
    op.drop_index("ix_email_sequences_recipient", table_name="email_sequences")
    op.drop_table("email_sequences")
