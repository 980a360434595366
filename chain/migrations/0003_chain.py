"""chain tables: wallets (encrypted keys), chain_actions (transaction journal), chain_contracts

Revision ID: 0003_chain
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003_chain"
down_revision = "0001"
branch_labels = ("chain",)
depends_on = None

_NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "wallets",
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("org_id", sa.UUID(), nullable=False),
        sa.Column("address", sa.String(42), nullable=False),
        # EMBEDDED: a player's custodial wallet; OPERATOR: the fleet's own signer (one at most).
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("owner_ref", sa.Text(), nullable=True),
        # AES-256-GCM: nonce (12) || ciphertext || tag (16), AAD = lower-case address.
        sa.Column("key_ciphertext", sa.LargeBinary(), nullable=True),
        sa.Column("kek_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_wallets"),
        sa.UniqueConstraint("address", name="uq_wallets_address"),
        sa.CheckConstraint("kind IN ('EMBEDDED', 'OPERATOR')", name="ck_wallets_kind"),
        sa.CheckConstraint(
            "(key_ciphertext IS NULL) = (kek_id IS NULL)", name="ck_wallets_key_has_kek"
        ),
    )
    op.create_index(
        "uq_wallets_one_operator",
        "wallets",
        ["kind"],
        unique=True,
        postgresql_where=sa.text("kind = 'OPERATOR'"),
    )
    op.create_index("ix_wallets_kek_id", "wallets", ["kek_id"])

    op.create_table(
        "chain_actions",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("round_id", sa.BigInteger(), nullable=True),
        sa.Column("address", sa.String(42), nullable=True),
        sa.Column("chain_id", sa.BigInteger(), nullable=True),
        sa.Column("contract", sa.String(42), nullable=True),
        sa.Column("signer", sa.String(42), nullable=True),
        # PENDING, SENT, CONFIRMED, ALREADY_DONE, FAILED, SKIPPED
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("nonce", sa.BigInteger(), nullable=True),
        sa.Column("tx_hash", sa.String(66), nullable=True),
        # Every broadcast (hash, fees, time): a replacement keeps the nonce and adds a hash.
        sa.Column(
            "tx_hashes", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False
        ),
        # The latest signed transaction (public data): rebroadcast unchanged after a crash.
        sa.Column("raw_tx", sa.LargeBinary(), nullable=True),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("gas_used", sa.BigInteger(), nullable=True),
        sa.Column("block_number", sa.BigInteger(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_chain_actions"),
        sa.UniqueConstraint("job_id", name="uq_chain_actions_job_id"),
    )
    op.create_index("ix_chain_actions_round", "chain_actions", ["type", "round_id"])
    op.create_index("ix_chain_actions_signer_status", "chain_actions", ["signer", "status"])

    op.create_table(
        "chain_contracts",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("address", sa.String(42), nullable=False),
        sa.Column("tx_hash", sa.String(66), nullable=True),
        sa.Column("block_number", sa.BigInteger(), nullable=True),
        sa.Column("deployer", sa.String(42), nullable=True),
        sa.Column("artifact_sha256", sa.String(64), nullable=True),
        sa.Column("deployed_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_chain_contracts"),
        sa.UniqueConstraint("chain_id", "name", name="uq_chain_contracts_chain_name"),
    )


def downgrade() -> None:
    op.drop_table("chain_contracts")
    op.drop_index("ix_chain_actions_signer_status", table_name="chain_actions")
    op.drop_index("ix_chain_actions_round", table_name="chain_actions")
    op.drop_table("chain_actions")
    op.drop_index("ix_wallets_kek_id", table_name="wallets")
    op.drop_index("uq_wallets_one_operator", table_name="wallets")
    op.drop_table("wallets")
