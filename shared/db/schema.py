"""Is the database migrated? The revisions it records against the heads of the migration scripts.

The migration tree has one head per domain branch (they branch off the kernel's `0001`), and
more are added as the fleet grows: the check compares with the heads of the scripts of the
kernel and of every registered domain (`migrate.version_locations`), never with a revision written down here. A database is migrated when every script
head is its recorded revision or an ancestor of one; a recorded revision these scripts do not
know (a newer release migrated it) counts as ahead, not behind.

Used by `send` (once per process, before the first enqueue), by every process's
`/health/ready`, by a worker before it fetches (`db/watch.py`), and by `fleet db wait` (a
Kubernetes init container: `wait_migrated`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import Any

import psycopg

from ..errors import SchemaNotMigrated


@cache
def _scripts() -> Any:
    """The Alembic scripts `migrate.py` applies: the kernel's and every registered domain's
    (alembic is imported only on use; the files are read once per process)."""
    from alembic.script import ScriptDirectory

    from .migrate import alembic_config

    return ScriptDirectory.from_config(alembic_config(""))


#: What every refusal says (the operator's next step).
NOT_MIGRATED = "database not migrated: run `fleet db upgrade`"


@cache
def script_heads() -> frozenset[str]:
    """The heads of the migration scripts: the kernel's and the registered domains' (read once
    per process)."""
    return frozenset(_scripts().get_heads())


@cache
def _reached(revisions: frozenset[str]) -> tuple[frozenset[str], bool]:
    """Every script revision at or below `revisions`, and whether one of them is unknown."""
    from alembic.script.revision import ResolutionError
    from alembic.util import CommandError

    script = _scripts()
    reached: set[str] = set()
    unknown = False
    for revision in revisions:
        try:
            reached.update(r.revision for r in script.iterate_revisions(revision, "base"))
        except (CommandError, ResolutionError):
            unknown = True
    return frozenset(reached), unknown


def recorded(conn: psycopg.Connection[Any]) -> frozenset[str] | None:
    """The revisions the database records; None when it has no `alembic_version` table."""
    row = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return None
    return frozenset(r[0] for r in conn.execute("SELECT version_num FROM alembic_version"))


def missing_heads(revisions: frozenset[str] | None) -> list[str]:
    """Script heads the database has not reached (all of them when it was never migrated)."""
    heads = script_heads()
    if not revisions:
        return sorted(heads)
    reached, unknown = _reached(revisions)
    if unknown:
        return []  # migrated by a newer release: ahead of these scripts, not behind
    return sorted(heads - reached)


def check(conn: psycopg.Connection[Any]) -> None:
    """Raise `SchemaNotMigrated` unless the database has every head of the scripts."""
    missing = missing_heads(recorded(conn))
    if missing:
        raise SchemaNotMigrated(f"{NOT_MIGRATED} (missing: {', '.join(missing)})")


class SchemaWaitTimedOut(SchemaNotMigrated):
    """the database did not reach every migration head in time"""

    code = "SCHEMA_WAIT_TIMED_OUT"


def wait_migrated(
    dsn: str,
    *,
    timeout_s: float,
    interval_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[str], None] = lambda reason: None,
) -> None:
    """Return once the database has every head of the scripts (`fleet db wait`: a worker's init
    container, so that no pod of a new release starts before its migration Job has run).

    Postgres not answering yet counts as not migrated: the pod may start before the database.
    `on_wait` hears why each look failed (once per change of reason). Past `timeout_s`,
    `SchemaWaitTimedOut` says what was still missing, or why the database could not be read."""
    deadline = clock() + timeout_s
    said = ""
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=max(1, min(5, int(timeout_s)))) as conn:
                missing = missing_heads(recorded(conn))
            reason = f"missing: {', '.join(missing)}" if missing else ""
        except psycopg.Error as exc:
            reason = f"database unreachable: {str(exc).strip().splitlines()[0]}"
        if not reason:
            return
        if reason != said:
            on_wait(reason)
            said = reason
        left = deadline - clock()
        if left <= 0:
            raise SchemaWaitTimedOut(
                f"database not migrated after {timeout_s:g} s ({reason}): has the migration "
                "Job of this release run? (`fleet db upgrade`)"
            )
        sleep(min(interval_s, left))
