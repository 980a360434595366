"""export: exports and the example ledger of the ACCOUNTING export (issue 6)

Revision ID: 0004_export
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004_export"
down_revision = "0001"
branch_labels = None
depends_on = None

EXPORT_STATUSES = "'PENDING', 'RUNNING', 'RETRYING', 'COMPLETED', 'FAILED', 'CANCELED'"


def upgrade() -> None:
    op.create_table(
        "exports",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("requested_by", sa.UUID(), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        # The contract's ExportParams: {date_range: {start, end} | null, format, filters}.
        sa.Column("params", postgresql.JSONB(), nullable=False),
        sa.Column("status", sa.String(16), server_default="PENDING", nullable=False),
        sa.Column("progress", postgresql.JSONB(), nullable=True),  # {done, total}
        sa.Column("row_count", sa.BigInteger(), nullable=True),
        sa.Column("file_object_id", sa.UUID(), nullable=True),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_exports"),
        sa.ForeignKeyConstraint(
            ["file_object_id"], ["file_objects.id"], name="fk_exports_file_object_id_file_objects"
        ),
        sa.CheckConstraint(f"status IN ({EXPORT_STATUSES})", name="ck_exports_status"),
    )
    op.create_index("ix_exports_org_created", "exports", ["org_id", "created_at"])
    # Example data of the ACCOUNTING export; rows are seeded by tests and dev tooling only.
    op.create_table(
        "ledger_entries",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("entry_date", sa.Date(), nullable=False),
        sa.Column("journal", sa.String(16), nullable=False),
        sa.Column("account", sa.String(32), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("debit", sa.Numeric(14, 2), server_default="0", nullable=False),
        sa.Column("credit", sa.Numeric(14, 2), server_default="0", nullable=False),
        sa.Column("currency", sa.String(3), server_default="EUR", nullable=False),
        sa.Column("reference", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_ledger_entries"),
    )
    op.create_index("ix_ledger_entries_org_date", "ledger_entries", ["org_id", "entry_date", "id"])


def downgrade() -> None:
    op.drop_index("ix_ledger_entries_org_date", table_name="ledger_entries")
    op.drop_table("ledger_entries")
    op.drop_index("ix_exports_org_created", table_name="exports")
    op.drop_table("exports")
