"""ai: tasks and usage per org, model and day (issue 8)

Revision ID: 0005_ai
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005_ai"
down_revision = "0001"
branch_labels = None
depends_on = None

TASKS = "'summarize', 'extract', 'classify', 'embed'"
STATUSES = "'PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED'"


def upgrade() -> None:
    op.create_table(
        "ai_tasks",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("task", sa.String(16), nullable=False),
        # Text, or a list of texts (embed).
        sa.Column("input", postgresql.JSONB(), nullable=False),
        sa.Column(
            "params", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.Column("status", sa.String(16), server_default="PENDING", nullable=False),
        # The output (summary, extracted object, label, vectors): stored once, never recomputed.
        sa.Column("result", postgresql.JSONB(), nullable=True),
        sa.Column("provider", sa.String(32), nullable=True),
        sa.Column("model", sa.String(200), nullable=True),
        # Totals of every provider call of the task, repairs and failed attempts included.
        sa.Column("calls", sa.Integer(), server_default="0", nullable=False),
        sa.Column("tokens_in", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("tokens_out", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("cost", sa.Numeric(18, 8), server_default="0", nullable=False),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        # Provider Retry-After deferrals taken (bounded by AI_MAX_DEFERRALS).
        sa.Column("deferrals", sa.Integer(), server_default="0", nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name="pk_ai_tasks"),
        sa.CheckConstraint(f"task IN ({TASKS})", name="ck_ai_tasks_task"),
        sa.CheckConstraint(f"status IN ({STATUSES})", name="ck_ai_tasks_status"),
    )
    op.create_index("ix_ai_tasks_org_created", "ai_tasks", ["org_id", "created_at"])
    op.create_table(
        "ai_usage",
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),  # UTC
        sa.Column("requests", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("tokens_in", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("tokens_out", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("cost", sa.Numeric(18, 8), server_default="0", nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("org_id", "model", "day", name="pk_ai_usage"),
    )


def downgrade() -> None:
    op.drop_table("ai_usage")
    op.drop_index("ix_ai_tasks_org_created", table_name="ai_tasks")
    op.drop_table("ai_tasks")
