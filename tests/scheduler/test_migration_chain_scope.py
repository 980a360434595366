"""Migration 0009_chain_scope on rows written before it: journal keys, keeper keys and indexed
actions re-keyed with the chain id and the lottery, and back again on downgrade."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from alembic import command

from shared.config import Settings
from shared.db.migrate import alembic_config, ensure_database

LOTTERY = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
BADGE = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0"
PLAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
TX = "0x" + "ab" * 32


@pytest.fixture
def scratch(settings: Settings) -> Iterator[tuple[str, str]]:
    """A database of its own, migrated up to the revision before 0009 (url, dsn)."""
    name = f"{settings.database_dsn.rsplit('/', 1)[1]}_mig_{secrets.token_hex(3)}"
    url = settings.database_url.rsplit("/", 1)[0] + "/" + name
    dsn = settings.database_dsn.rsplit("/", 1)[0] + "/" + name
    ensure_database(url)
    command.upgrade(alembic_config(url), "0007_indexer")
    yield url, dsn
    admin = settings.database_dsn.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def ids(conn: Any, table: str) -> list[str]:
    return sorted(r[0] for r in conn.execute(f"SELECT job_id FROM {table}"))


def test_existing_rows_are_rekeyed_with_chain_and_lottery(scratch: tuple[str, str]) -> None:
    url, dsn = scratch
    player, lottery = PLAYER.lower(), LOTTERY.lower()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO chain_contracts (chain_id, name, address) VALUES"
            " (31337, 'BlockLucky', %s), (31337, 'BlockLuckyPOAP', %s)",
            (LOTTERY, BADGE),
        )
        conn.execute(
            "INSERT INTO chain_actions (job_id, type, round_id, address, chain_id, contract, status)"
            " VALUES (%s, 'MINT_BADGE', 3, %s, 31337, %s, 'CONFIRMED'),"
            " (%s, 'CLAIM_PRIZE', 3, %s, 31337, %s, 'SENT'),"
            " (%s, 'KEEPER_DRAW', 3, %s, 31337, %s, 'CONFIRMED'),"
            " ('forced-revert', 'MINT_BADGE', 2, %s, NULL, NULL, 'FAILED')",
            (
                f"MINT_BADGE-3-{player}", PLAYER, BADGE,
                f"CLAIM_PRIZE-3-{player}", PLAYER, LOTTERY,
                f"KEEPER_DRAW-3-{lottery}", LOTTERY, LOTTERY,
                PLAYER,
            ),
        )  # fmt: skip
        conn.execute(
            "INSERT INTO lottery_tickets (chain_id, contract, tx_hash, log_index, block_number,"
            " round_id, player, ticket_count, amount_wei) VALUES (31337, %s, %s, 0, 5, 3, %s, 1, 1)",
            (LOTTERY, TX, PLAYER),
        )
        conn.execute(
            "INSERT INTO indexed_actions (chain_id, job_name, job_id, tx_hash, log_index,"
            " block_number) VALUES (31337, 'chain:mint_badge', %s, %s, 0, 5)",
            (f"MINT_BADGE-3-{player}", TX),
        )

    command.upgrade(alembic_config(url), "0009_chain_scope")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert ids(conn, "chain_actions") == sorted(
            [
                f"CLAIM_PRIZE-31337-{lottery}-3-{player}",
                f"KEEPER_DRAW-31337-{lottery}-3",
                f"MINT_BADGE-31337-{lottery}-3-{player}",
                "forced-revert",  # not a chain action key: left alone
            ]
        )
        assert ids(conn, "indexed_actions") == [f"MINT_BADGE-31337-{lottery}-3-{player}"]
        assert conn.execute("SELECT count(*) FROM chain_genesis").fetchone() == (0,)

    command.downgrade(alembic_config(url), "0007_indexer")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert ids(conn, "chain_actions") == sorted(
            [
                f"CLAIM_PRIZE-3-{player}",
                f"KEEPER_DRAW-3-{lottery}",
                f"MINT_BADGE-3-{player}",
                "forced-revert",
            ]
        )
        assert ids(conn, "indexed_actions") == [f"MINT_BADGE-3-{player}"]
