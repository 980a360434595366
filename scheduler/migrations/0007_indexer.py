"""indexer: chain cursor, block hashes, lottery projections, badges, indexed actions, keeper runs

Revision ID: 0007_indexer
Revises: 0003_chain

Projections are keyed by (chain_id, tx_hash, log_index): indexing a log twice changes nothing.
Every row carries `block_number` so that a reorg rewinds them with one DELETE per table.
`lottery_tickets` / `lottery_winners` have the columns the export worker reads (issue 6).
"""

from __future__ import annotations

from alembic import op

revision = "0007_indexer"
down_revision = "0003_chain"
branch_labels = None
depends_on = None

_LOG = """
    chain_id     bigint      NOT NULL,
    contract     varchar(42) NOT NULL,
    tx_hash      varchar(66) NOT NULL,
    log_index    integer     NOT NULL,
    block_number bigint      NOT NULL,
    block_time   timestamptz,
    indexed_at   timestamptz NOT NULL DEFAULT now()
"""
_ORG = "org_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000'"

TABLES = {
    "chain_cursor": """
        name         text        NOT NULL,
        chain_id     bigint      NOT NULL,
        block_number bigint      NOT NULL,
        block_hash   varchar(66),
        updated_at   timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (name, chain_id)
    """,
    "indexed_blocks": """
        chain_id     bigint      NOT NULL,
        block_number bigint      NOT NULL,
        block_hash   varchar(66) NOT NULL,
        PRIMARY KEY (chain_id, block_number)
    """,
    "lottery_rounds": f"""
        id bigserial PRIMARY KEY, {_ORG},
        round_id bigint NOT NULL,
        status varchar(16) NOT NULL,                 -- OPEN, COMPLETED, CANCELLED
        ticket_price_wei numeric(78, 0) NOT NULL,
        end_time timestamptz NOT NULL,
        min_players integer NOT NULL,
        closed_block_number bigint,
        {_LOG},
        UNIQUE (chain_id, tx_hash, log_index),
        UNIQUE (chain_id, contract, round_id)
    """,
    "lottery_tickets": f"""
        id bigserial PRIMARY KEY, {_ORG},
        round_id bigint NOT NULL,
        player varchar(42) NOT NULL,
        ticket_count integer NOT NULL,
        amount_wei numeric(78, 0) NOT NULL,
        {_LOG},
        UNIQUE (chain_id, tx_hash, log_index)
    """,
    "lottery_winners": f"""
        id bigserial PRIMARY KEY, {_ORG},
        round_id bigint NOT NULL,
        winner varchar(42) NOT NULL,
        prize_wei numeric(78, 0) NOT NULL,
        {_LOG},
        UNIQUE (chain_id, tx_hash, log_index)
    """,
    "lottery_cancellations": f"""
        id bigserial PRIMARY KEY, {_ORG},
        round_id bigint NOT NULL,
        payers integer NOT NULL,
        {_LOG},
        UNIQUE (chain_id, tx_hash, log_index)
    """,
    "badges": f"""
        id bigserial PRIMARY KEY, {_ORG},
        player varchar(42) NOT NULL,
        round_id bigint NOT NULL,
        token_id numeric(78, 0) NOT NULL,
        {_LOG},
        UNIQUE (chain_id, tx_hash, log_index)
    """,
    # The follow-up job each log asked for: a reorg cancels those whose every log is orphaned.
    "indexed_actions": """
        id bigserial PRIMARY KEY,
        chain_id bigint NOT NULL,
        job_name text NOT NULL,
        job_id text NOT NULL,
        outbox_event_id uuid,
        tx_hash varchar(66) NOT NULL,
        log_index integer NOT NULL,
        block_number bigint NOT NULL,
        status varchar(24) NOT NULL DEFAULT 'ENQUEUED',  -- ENQUEUED, ORPHANED
        outcome text,
        created_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (chain_id, job_id, tx_hash, log_index)
    """,
    "keeper_actions": """
        id bigserial PRIMARY KEY,
        chain_id bigint NOT NULL,
        contract varchar(42) NOT NULL,
        ran_at timestamptz NOT NULL,
        holder text NOT NULL,
        outcome varchar(32) NOT NULL,
        round_id bigint,
        tx_hash varchar(66),
        error text
    """,
}

INDEXES = (
    "CREATE INDEX ix_lottery_tickets_round ON lottery_tickets (chain_id, contract, round_id)",
    "CREATE INDEX ix_lottery_tickets_block ON lottery_tickets (chain_id, block_number)",
    "CREATE INDEX ix_lottery_winners_block ON lottery_winners (chain_id, block_number)",
    "CREATE INDEX ix_lottery_rounds_block ON lottery_rounds (chain_id, block_number)",
    "CREATE INDEX ix_lottery_cancellations_block ON lottery_cancellations (chain_id, block_number)",
    "CREATE INDEX ix_badges_block ON badges (chain_id, block_number)",
    "CREATE INDEX ix_indexed_actions_block ON indexed_actions (chain_id, block_number)",
    "CREATE INDEX ix_indexed_actions_job ON indexed_actions (chain_id, job_id)",
    "CREATE INDEX ix_keeper_actions_ran_at ON keeper_actions (chain_id, ran_at)",
)


def upgrade() -> None:
    for name, body in TABLES.items():
        op.execute(f"CREATE TABLE {name} ({body})")
    for statement in INDEXES:
        op.execute(statement)


def downgrade() -> None:
    for name in reversed(TABLES):
        op.execute(f"DROP TABLE {name}")
