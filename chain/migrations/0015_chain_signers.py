"""wallets: the SIGNER kind, the operator's pool of signers (issue 38)

A SIGNER wallet is one more operator signer of the chain actions (badge mints): its key sealed
like every other, its own nonce lane and lock. The OPERATOR wallet stays the one primary signer
(deployments, the keeper).

Revision ID: 0015_chain_signers
Revises: 0009_chain_scope
"""

from __future__ import annotations

from alembic import op

revision = "0015_chain_signers"
down_revision = "0009_chain_scope"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint("ck_wallets_kind", "wallets", type_="check")
    op.create_check_constraint(
        "ck_wallets_kind", "wallets", "kind IN ('EMBEDDED', 'OPERATOR', 'SIGNER')"
    )


def downgrade() -> None:
    # A signer's key is not thrown away by a downgrade: refuse while one is stored.
    op.execute(
        "DO $$ BEGIN IF EXISTS (SELECT 1 FROM wallets WHERE kind = 'SIGNER') THEN"
        " RAISE EXCEPTION 'SIGNER wallets are stored: remove them before downgrading';"
        " END IF; END $$"
    )
    op.drop_constraint("ck_wallets_kind", "wallets", type_="check")
    op.create_check_constraint("ck_wallets_kind", "wallets", "kind IN ('EMBEDDED', 'OPERATOR')")
