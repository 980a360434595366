"""The single-statement writes of a send (issue 16: three statements per email, no pipeline):
durable although the worker's pool turns synchronous_commit off, and autocommit confined to
the block that asked for it."""

from __future__ import annotations

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from workers.email import store


def test_a_durable_statement_commits_with_synchronous_commit_on(database: str) -> None:
    # A connection like the worker's: synchronous_commit off for the session, autocommit
    with psycopg.connect(database, autocommit=True, options="-c synchronous_commit=off") as conn:
        during = conn.execute(
            f"SELECT current_setting('synchronous_commit') FROM {store.DURABLE}"
        ).fetchone()
        after = conn.execute("SELECT current_setting('synchronous_commit')").fetchone()

    assert during == ("on",)  # for the statement's own transaction, its commit included
    assert after == ("off",)  # and only for it


def _pool(database: str) -> ConnectionPool:
    return ConnectionPool(database, min_size=1, max_size=1, open=True)


def test_an_autocommit_connection_goes_back_to_the_pool_transactional(database: str) -> None:
    with _pool(database) as pool:
        with store.autocommit(pool) as conn:
            assert conn.autocommit
        with pytest.raises(psycopg.errors.DivisionByZero), store.autocommit(pool) as conn:
            conn.execute("SELECT 1 / 0")

        with pool.connection() as again:
            assert again is conn and not again.autocommit
            again.execute("SELECT 1")
            assert again.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
