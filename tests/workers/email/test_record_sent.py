"""Recording SENT after the server accepted: retried in place while the database cannot be
reached (delivery._record_sent), since a retried job would stop at UNCONFIRMED."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from shared.runtime import Runtime
from workers.email import delivery

from .helpers import row, schedule, unique


class FlakyPool:
    """A pool whose first `failures` connections fail like a database that is down."""

    def __init__(self, pool: Any, failures: int) -> None:
        self.pool, self.failures, self.calls = pool, failures, 0

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise psycopg.OperationalError("connection refused")
        with self.pool.connection() as conn:
            yield conn


def test_a_database_that_comes_back_gets_the_sent_row_after_doubling_waits(
    runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    email = schedule(db, unique("sent"))
    pool = FlakyPool(runtime.pool, failures=2)
    started = time.monotonic()
    delivery._record_sent(
        SimpleNamespace(pool=pool),
        email,
        "250 2.0.0 Ok",
        {},
        datetime.now(UTC),  # type: ignore[arg-type]
    )
    elapsed = time.monotonic() - started
    assert pool.calls == 3
    assert 0.6 <= elapsed < 3  # 0.2 s, then 0.4 s
    stored = row(db, email.id)
    assert stored["status"] == "SENT" and stored["smtp_reply"] == "250 2.0.0 Ok"


def test_a_database_still_down_after_six_tries_fails_the_job(
    runtime: Runtime, db: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    email = schedule(db, unique("down"))
    pool = FlakyPool(runtime.pool, failures=100)
    with pytest.raises(psycopg.OperationalError, match="connection refused"):
        delivery._record_sent(
            SimpleNamespace(pool=pool),
            email,
            "250 2.0.0 Ok",
            {},
            datetime.now(UTC),  # type: ignore[arg-type]
        )
    assert pool.calls == 6
    assert waits == [0.2, 0.4, 0.8, 1.6, 3.2]
    assert row(db, email.id)["status"] == email.status  # not SENT
