"""pause_audit: who paused or resumed a queue or a periodic job, when and why

Revision ID: 0012_pauses
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_pauses"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pause_audit",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),  # queue | schedule
        sa.Column("target", sa.String(200), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),  # pause | resume | run-now
        sa.Column("actor", sa.String(320), nullable=False),
        sa.Column("reason", sa.Text(), server_default="", nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_pause_audit_target_at", "pause_audit", ["target", "at"])


def downgrade() -> None:
    op.drop_index("ix_pause_audit_target_at", table_name="pause_audit")
    op.drop_table("pause_audit")
