"""notes: the notes table

Revision ID: n001_notes
Revises: 0001
"""

from alembic import op

revision = "n001_notes"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE TABLE notes (id uuid PRIMARY KEY, text text NOT NULL)")


def downgrade() -> None:
    op.execute("DROP TABLE notes")
