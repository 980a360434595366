"""Test sessions copy their database from one migrated template (issue 34)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from shared.config import Settings
from shared.db import schema
from shared.db.migrate import admin_dsn
from tests.support import template_db

pytestmark = pytest.mark.skipif(
    os.environ.get("DATABASE_POOLER") == "transaction",
    reason="behind a transaction-mode pooler the session database is migrated, not copied "
    "(its pooled connections to the template being built would block the rename)",
)


@pytest.fixture
def names(settings: Settings) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    with psycopg.connect(admin_dsn(settings.database_url), autocommit=True) as conn:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _url(settings: Settings, name: str) -> str:
    return template_db._with_name(settings.database_url, name)


def _heads(settings: Settings, name: str) -> set[str]:
    dsn = _url(settings, name).replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(dsn) as conn:
        return {row[0] for row in conn.execute("SELECT version_num FROM alembic_version")}


def test_a_session_database_is_a_migrated_copy_of_the_template(
    settings: Settings, names: list[str], monkeypatch: Any
) -> None:
    # A hash of its own: the template is built here, not found from an earlier session.
    fresh = uuid.uuid4().hex[:16]
    monkeypatch.setattr(template_db, "migrations_hash", lambda: fresh)
    first, second = (f"jobfleet_test_tmpl_{uuid.uuid4().hex[:8]}" for _ in range(2))
    names += [first, second, template_db.PREFIX + fresh]

    how = [template_db.create(_url(settings, n)) for n in (first, second)]

    assert how == [f"copied from {template_db.PREFIX}{fresh}"] * 2
    for name in (first, second):
        assert schema.missing_heads(frozenset(_heads(settings, name))) == []


def test_a_new_migration_set_drops_templates_of_other_migrations_built_over_a_day_ago(
    settings: Settings, names: list[str], monkeypatch: Any
) -> None:
    stale, recent, new = (uuid.uuid4().hex[:16] for _ in range(3))
    names += [template_db.PREFIX + h for h in (stale, recent, new)]
    for built in (stale, recent):
        monkeypatch.setattr(template_db, "migrations_hash", lambda built=built: built)
        names.append(name := f"jobfleet_test_tmpl_{uuid.uuid4().hex[:8]}")
        template_db.create(_url(settings, name))
    with psycopg.connect(admin_dsn(settings.database_url), autocommit=True) as conn:
        long_ago = int(time.time()) - template_db.UNUSED_AFTER_S - 60
        conn.execute(f"COMMENT ON DATABASE \"{template_db.PREFIX}{stale}\" IS 'built {long_ago}'")
        dropped = template_db.drop_unused(conn, keep=template_db.PREFIX + new)
        present = {
            row[0]
            for row in conn.execute(
                "SELECT datname FROM pg_database WHERE datname = ANY(%s)",
                ([template_db.PREFIX + h for h in (stale, recent)],),
            )
        }

    assert template_db.PREFIX + stale in dropped
    assert present == {template_db.PREFIX + recent}


def test_the_hash_changes_with_a_migration_file(tmp_path: Any, monkeypatch: Any) -> None:
    (tmp_path / "0001_a.py").write_text("a = 1\n")
    monkeypatch.setattr(template_db, "version_locations", lambda: [str(tmp_path)])
    before = template_db.migrations_hash()
    (tmp_path / "0002_b.py").write_text("b = 2\n")
    assert template_db.migrations_hash() != before
