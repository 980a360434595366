"""chain scope: journal and indexer keys carry the chain id and the lottery; genesis per chain

Revision ID: 0009_chain_scope
Revises: 0007_indexer

Job ids of the chain actions became `{TYPE}-{chain_id}-{lottery}-{round_id}-{address}` and the
keeper's journal keys `{KIND}-{chain_id}-{lottery}-{round_id}` (DESIGN §2), so that a second
deployment on one chain, or a chain restarted from genesis, never finds an earlier one's rows.
Existing `chain_actions` and `indexed_actions` rows are re-keyed in place (the lottery: the
row's own contract for claims and keeper rows, the projected log's contract or the recorded
lottery for badges). `job_runs` and the outbox keep their ids: a v1 message still queued keeps
its v1 id, and the worker journals it under the scoped key.

`chain_genesis` remembers the hash of block 0 of each chain id: a node whose genesis changed
(a development chain restarted without its state) resets that chain's derived state once.
"""

from __future__ import annotations

from alembic import op

revision = "0009_chain_scope"
down_revision = "0007_indexer"
branch_labels = None
depends_on = None

_ACTIONS = "('MINT_BADGE', 'CLAIM_PRIZE', 'CLAIM_REFUND')"
_LEGACY_ACTION = r"'^(MINT_BADGE|CLAIM_PRIZE|CLAIM_REFUND)-([0-9]+)-(0x[0-9a-f]{40})$'"
_LEGACY_KEEPER = r"'^(KEEPER_DRAW|KEEPER_CLOSE)-([0-9]+)-(0x[0-9a-f]{40})$'"
_RECORDED_LOTTERY = (
    "(SELECT lower(address) FROM chain_contracts c"
    " WHERE c.chain_id = {t}.chain_id AND c.name = 'BlockLucky')"
)


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE chain_genesis (
            chain_id     bigint      PRIMARY KEY,
            genesis_hash varchar(66) NOT NULL,
            seen_at      timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    # Claims were sent to the lottery itself (`contract`); badges to the badge contract.
    op.execute(
        f"""
        UPDATE chain_actions a SET job_id = a.type || '-' || a.chain_id || '-' || lottery.addr
            || '-' || a.round_id || '-' || lower(a.address)
        FROM (SELECT id, CASE WHEN type = 'MINT_BADGE' THEN {_RECORDED_LOTTERY.format(t="x")}
                     ELSE lower(contract) END AS addr
              FROM chain_actions x) lottery
        WHERE lottery.id = a.id AND lottery.addr IS NOT NULL AND a.chain_id IS NOT NULL
          AND a.type IN {_ACTIONS} AND a.job_id ~ {_LEGACY_ACTION}
        """
    )
    op.execute(
        f"""
        UPDATE chain_actions SET job_id = regexp_replace(job_id, {_LEGACY_KEEPER},
            '\\1-' || chain_id || '-\\3-\\2')
        WHERE chain_id IS NOT NULL AND job_id ~ {_LEGACY_KEEPER}
        """
    )
    # The lottery of an indexed action: the contract of the log that asked for it.
    op.execute(
        f"""
        UPDATE indexed_actions i SET job_id = regexp_replace(i.job_id, {_LEGACY_ACTION},
            '\\1-' || i.chain_id || '-' || src.addr || '-\\2-\\3')
        FROM (
            SELECT x.id, lower(COALESCE(
                (SELECT contract FROM lottery_tickets t WHERE t.chain_id = x.chain_id
                   AND t.tx_hash = x.tx_hash AND t.log_index = x.log_index),
                (SELECT contract FROM lottery_winners w WHERE w.chain_id = x.chain_id
                   AND w.tx_hash = x.tx_hash AND w.log_index = x.log_index),
                (SELECT contract FROM lottery_cancellations c WHERE c.chain_id = x.chain_id
                   AND c.tx_hash = x.tx_hash AND c.log_index = x.log_index),
                {_RECORDED_LOTTERY.format(t="x")}
            )) AS addr
            FROM indexed_actions x
        ) src
        WHERE src.id = i.id AND src.addr IS NOT NULL AND i.job_id ~ {_LEGACY_ACTION}
        """
    )


def downgrade() -> None:
    scoped_action = (
        r"'^(MINT_BADGE|CLAIM_PRIZE|CLAIM_REFUND)-[0-9]+-0x[0-9a-f]{40}-([0-9]+)-(0x[0-9a-f]{40})$'"
    )
    scoped_keeper = r"'^(KEEPER_DRAW|KEEPER_CLOSE)-[0-9]+-(0x[0-9a-f]{40})-([0-9]+)$'"
    for table in ("chain_actions", "indexed_actions"):
        op.execute(
            f"UPDATE {table} SET job_id = regexp_replace(job_id, {scoped_action}, '\\1-\\2-\\3')"
            f" WHERE job_id ~ {scoped_action}"
        )
    op.execute(
        f"UPDATE chain_actions SET job_id = regexp_replace(job_id, {scoped_keeper}, '\\1-\\3-\\2')"
        f" WHERE job_id ~ {scoped_keeper}"
    )
    op.execute("DROP TABLE chain_genesis")
