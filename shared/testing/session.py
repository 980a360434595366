"""A stand-in SQLAlchemy session that records what a product's write path would execute.

Each domain's `client` module writes their rows with `session.execute(text(...),
params)` and stage their job with `outbox.enqueue(session, ...)`, ids generated client-side and
no `RETURNING`: a test runs that write path on a `RecordingSession` with no database, then asks
what was written (`statements`, `inserts_into("exports")`) and what was sent (the `jobfleet`
fixture). Reads answer nothing: a path that needs a row from the database needs a database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Statement:
    """One `execute` call: the SQL text and its parameters."""

    sql: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def verb(self) -> str:
        return self.sql.lstrip().split(None, 1)[0].upper() if self.sql.strip() else ""


class _NoRows:
    """What `execute` answers: no rows (there is no database behind a recording session)."""

    rowcount = 0

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def scalar(self) -> None:
        return None

    def scalar_one_or_none(self) -> None:
        return None

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class RecordingSession:
    """`begin()`, `commit()`, `rollback()`, `close()`, `add()`, `execute()`; nothing reaches a
    database. A statement counts as committed once the transaction it ran in commits."""

    def __init__(self) -> None:
        self.statements: list[Statement] = []
        self.added: list[Any] = []
        self.commits = 0
        self.rollbacks = 0
        self.closed = False
        self._pending: list[Statement | Any] = []
        self.committed: list[Statement | Any] = []
        #: What runs when the transaction ends (the test kit's staged jobs: sent at the commit).
        self._at_commit: list[Callable[[], None]] = []
        self._at_rollback: list[Callable[[], None]] = []

    def on_transaction_end(
        self, *, commit: Callable[[], None], rollback: Callable[[], None]
    ) -> None:
        """Call `commit` after this transaction commits, or `rollback` after it rolls back."""
        self._at_commit.append(commit)
        self._at_rollback.append(rollback)

    # -- the Session surface the clients use ----------------------------------------------------

    def execute(self, statement: Any, params: Mapping[str, Any] | None = None, **_: Any) -> _NoRows:
        recorded = Statement(str(statement), dict(params or {}))
        self.statements.append(recorded)
        self._pending.append(recorded)
        return _NoRows()

    def add(self, instance: Any) -> None:
        self.added.append(instance)
        self._pending.append(instance)

    def flush(self) -> None:
        pass

    def commit(self) -> None:
        self.commits += 1
        self.committed.extend(self._pending)
        self._pending.clear()
        self._end(self._at_commit)

    def rollback(self) -> None:
        self.rollbacks += 1
        self._pending.clear()
        self._end(self._at_rollback)

    def _end(self, callbacks: list[Callable[[], None]]) -> None:
        run = list(callbacks)
        self._at_commit.clear()
        self._at_rollback.clear()
        for callback in run:
            callback()

    def close(self) -> None:
        if self._pending or self._at_rollback:
            self.rollback()
        self.closed = True

    @contextmanager
    def begin(self) -> Iterator[RecordingSession]:
        """`with session.begin():` commits on success and rolls back on an exception."""
        try:
            yield self
        except BaseException:
            self.rollback()
            raise
        self.commit()

    def __enter__(self) -> RecordingSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- asking ---------------------------------------------------------------------------------

    def inserts_into(self, table: str, *, committed: bool = False) -> list[Statement]:
        """The INSERT statements into `table` (only committed ones with `committed=True`)."""
        pool = self.committed if committed else self.statements
        return [
            s
            for s in pool
            if isinstance(s, Statement)
            and s.verb == "INSERT"
            and s.sql.split(None, 3)[2].strip('"').split("(")[0] == table
        ]
