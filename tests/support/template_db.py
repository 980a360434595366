"""Each test session's database, copied from one migrated template instead of migrated again.

Migrating a database costs ~1.3 s of CPU and 2-4 s under load; every pytest-xdist worker is a
session with its own database, so `make test` paid it once per worker. `create(url)` instead
copies `jobfleet_tmpl_<hash>` (`CREATE DATABASE … TEMPLATE`, ~0.3 s), where the hash is that of
every migration file Alembic reads: a changed or added migration gives a new template, built
once by the first session that needs it; templates of other migrations built over a day ago
are dropped then.

No lock is needed: a session builds the template under a name of its own and renames it into
place; a session that loses that race drops its copy and uses the winner's. Behind a
transaction-mode pooler (the PgBouncer pass) the server keeps pooled connections to what it
served, which would block the rename and the copy: there the session's database is migrated as
before.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from shared.db.migrate import MIGRATIONS, admin_dsn, upgrade, version_locations

PREFIX = "jobfleet_tmpl_"
#: A template of other migrations this old is dropped when a new one is built.
UNUSED_AFTER_S = 24 * 3600


def migrations_hash() -> str:
    digest = hashlib.sha256()
    files = [MIGRATIONS / "env.py"]
    for location in version_locations():
        files += sorted(Path(location).glob("*.py"))
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _with_name(database_url: str, name: str) -> str:
    return make_url(database_url).set(database=name).render_as_string(hide_password=False)


def _exists(conn: psycopg.Connection[tuple[object, ...]], name: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None
    )


def create(database_url: str, *, pooled: bool = False) -> str:
    """Create the database of `database_url`, migrated; returns how ("copied from …" or
    "migrated"). A database that exists already is migrated in place."""
    name = make_url(database_url).database
    if pooled:
        upgrade(database_url)
        return "migrated"
    template = PREFIX + migrations_hash()
    with psycopg.connect(admin_dsn(database_url), autocommit=True) as conn:
        if _exists(conn, name or ""):
            upgrade(database_url)
            return "migrated"
        for attempt in (1, 2):
            if not _exists(conn, template):
                _build(conn, database_url, template)
            try:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
                break
            except psycopg.errors.InvalidCatalogName:
                if attempt == 2:  # dropped again as it was built: give up loudly
                    raise
    return f"copied from {template}"


def _build(conn: psycopg.Connection[tuple[object, ...]], database_url: str, template: str) -> None:
    building = f"{template}_{uuid.uuid4().hex[:8]}"
    upgrade(_with_name(database_url, building))  # creates it
    conn.execute(f"COMMENT ON DATABASE \"{building}\" IS 'built {int(time.time())}'")
    try:
        conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')
    except psycopg.errors.DuplicateDatabase:  # another session built it meanwhile
        conn.execute(f'DROP DATABASE "{building}"')
        return
    drop_unused(conn, keep=template)


def drop_unused(
    conn: psycopg.Connection[tuple[object, ...]], *, keep: str, older_than_s: float = UNUSED_AFTER_S
) -> list[str]:
    """Drop the templates of other migrations built more than `older_than_s` ago (another
    checkout on the same server may still copy a recent one); returns those dropped."""
    dropped = []
    for old, comment in conn.execute(
        "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database"
        " WHERE datname ~ %s AND datname <> %s",
        (f"^{PREFIX}[0-9a-f]{{16}}$", keep),
    ).fetchall():
        built = str(comment or "").removeprefix("built ")
        if built.isdigit() and time.time() - int(built) < older_than_s:
            continue
        try:
            conn.execute(f'DROP DATABASE "{old}"')
        except psycopg.Error:  # being copied right now: next time
            continue
        dropped.append(old)
    return dropped
