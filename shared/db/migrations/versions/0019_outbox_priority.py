"""outbox_events.priority: a staged job's priority (high, default, low; NULL: its job's own)

Revision ID: 0019_outbox_priority
Revises: 0018_run_stats

The relay sends the event with it (docs/kernel.md, "Fair share, limits and priorities"). NULL
for every earlier row and for producers that stage without one (the Node.js kit's statement).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_outbox_priority"
down_revision = "0018_run_stats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("outbox_events", sa.Column("priority", sa.String(8)))


def downgrade() -> None:
    op.drop_column("outbox_events", "priority")
