"""The migrations on a real Postgres, in a throwaway database of their own (dropped at the end).

- Upgrade to `heads` from an empty database applies every branch: the kernel's revisions and
  each registered domain's (`shared.db.migrate`: the kernel's versions directory plus every
  `Domain.migrations` package), wherever those revision files live.
- Each head, downgraded one step along its own branch and upgraded back to `heads`, leaves the
  schema exactly as before (columns, indexes, constraints, triggers, functions, views, types):
  every downgrade works and is reversible, and it touches no other branch.
- The SQLAlchemy models agree with the migrations: alembic's autogenerate comparison of
  `Base.metadata` (shared/db/models.py, the only declarative models) against the migrated
  database finds no difference. Checked: the tables the models declare (`file_objects`,
  `job_replays`, `job_runs`, `outbox_events`; the list is read from the metadata). Not checked:
  the tables written in raw SQL, which no model declares (domain tables, `job_executions`,
  `pause_audit`, `console_audit`, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import psycopg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, pool

from shared.config import Settings
from shared.db.migrate import alembic_config, upgrade
from shared.db.models import Base
from tests.support.scratch_db import Scratch, scratch_database

# Postgres' own objects, and extensions' (pg_trgm's functions, say), are not the migrations'.
# Column order is left out: a column dropped and added again comes last, and no query here
# depends on the order.
SNAPSHOT = {
    "columns": """
        SELECT table_name, column_name, data_type, udt_name, is_nullable,
               column_default, character_maximum_length, numeric_precision, is_identity
        FROM information_schema.columns WHERE table_schema = 'public'
        ORDER BY table_name, column_name""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
        ORDER BY tablename, indexname""",
    "constraints": """
        SELECT c.conrelid::regclass::text, c.conname, c.contype, pg_get_constraintdef(c.oid)
        FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
        WHERE n.nspname = 'public' ORDER BY 1, 2""",
    "triggers": """
        SELECT t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class r ON r.oid = t.tgrelid
        JOIN pg_namespace n ON n.oid = r.relnamespace
        WHERE n.nspname = 'public' AND NOT t.tgisinternal ORDER BY 1, 2""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), md5(p.prosrc)
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public'
          AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.objid = p.oid AND d.deptype = 'e')
        ORDER BY 1, 2""",
    "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = 'public' ORDER BY 1",
    "sequences": """
        SELECT sequencename, data_type, increment_by FROM pg_sequences
        WHERE schemaname = 'public' ORDER BY 1""",
    "types": """
        SELECT t.typname, t.typtype, coalesce(
                   (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                    FROM pg_enum e WHERE e.enumtypid = t.oid), '')
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = 'public' AND t.typtype IN ('e', 'd')
          AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.objid = t.oid AND d.deptype = 'e')
        ORDER BY 1""",
}

Snapshot = dict[str, list[tuple[Any, ...]]]


@pytest.fixture(scope="module")
def scratch(settings: Settings) -> Iterator[Scratch]:
    with scratch_database(settings, "migrations") as db:
        yield db


@pytest.fixture(scope="module")
def from_models(settings: Settings) -> Iterator[Scratch]:
    """A database whose tables were created from the models alone (`create_all`)."""
    with scratch_database(settings, "models") as db:
        engine = create_engine(db.url, poolclass=pool.NullPool)
        try:
            Base.metadata.create_all(engine)
        finally:
            engine.dispose()
        yield db


@pytest.fixture(scope="module")
def migrated(scratch: Scratch) -> Scratch:
    """The scratch database upgraded to `heads` from empty."""
    with psycopg.connect(scratch.dsn) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
    assert tables == (0,), "the scratch database is not empty"
    upgrade(scratch.url, "heads")
    return scratch


def script() -> ScriptDirectory:
    # The URL is not used to read the scripts: any database name will do.
    return ScriptDirectory.from_config(alembic_config("postgresql+psycopg://localhost/scripts"))


def applied(db: Scratch) -> set[str]:
    with psycopg.connect(db.dsn) as conn:
        return {r[0] for r in conn.execute("SELECT version_num FROM alembic_version")}


def snapshot(db: Scratch) -> Snapshot:
    with psycopg.connect(db.dsn) as conn:
        return {what: conn.execute(sql).fetchall() for what, sql in SNAPSHOT.items()}


def changes(before: Snapshot, after: Snapshot, aspects: Iterable[str] = SNAPSHOT) -> list[str]:
    out = []
    for what in aspects:
        gone = sorted(set(before[what]) - set(after[what]), key=repr)
        new = sorted(set(after[what]) - set(before[what]), key=repr)
        out += [f"{what}: lost {row}" for row in gone] + [f"{what}: gained {row}" for row in new]
    return out


def test_upgrade_from_empty_reaches_every_head(migrated: Scratch) -> None:
    heads = set(script().get_heads())
    assert len(heads) > 1, f"expected several branches off the kernel's first revision: {heads}"
    assert applied(migrated) == heads
    tables = {row[0] for row in snapshot(migrated)["columns"]}
    assert set(Base.metadata.tables) <= tables


@pytest.mark.parametrize("head", sorted(script().get_heads()))
def test_downgrade_one_step_and_back(migrated: Scratch, head: str) -> None:
    cfg = alembic_config(migrated.url)
    before = snapshot(migrated)
    revision = script().get_revision(head)
    assert revision is not None
    down = revision.down_revision
    parents = {down} if isinstance(down, str) else set(down or ())
    # A merge revision has no "one step down" for alembic (an ambiguous walk): it is stepped
    # down to one of its parents by name, which leaves both current.
    command.downgrade(cfg, f"{head}@-1" if len(parents) < 2 else sorted(parents)[-1])
    try:
        # Only this branch stepped down: its parent is current unless another head holds it.
        others = set(script().get_heads()) - {head}
        assert applied(migrated) - parents == others
        assert head not in applied(migrated)
        assert changes(before, snapshot(migrated)), f"downgrading {head} changed nothing"
    finally:
        command.upgrade(cfg, "heads")
    assert applied(migrated) == set(script().get_heads())
    assert changes(before, snapshot(migrated)) == []


def _declared(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Only the models' tables (and what belongs to them) are compared."""
    table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", None)
    return table in Base.metadata.tables


def test_models_agree_with_migrations(migrated: Scratch) -> None:
    engine = create_engine(migrated.url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "include_object": _declared,
                    "compare_type": True,
                    "compare_server_default": True,
                },
            )
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == [], "the models and the migrations disagree:\n" + "\n".join(map(_describe, diff))


def test_models_build_the_migrated_schema(migrated: Scratch, from_models: Scratch) -> None:
    """What autogenerate does not compare (an index's WHERE and INCLUDE, a default's text):
    the models' tables built by `create_all` are the migrated ones, as Postgres describes them."""
    aspects = ("columns", "indexes", "constraints")

    def declared(db: Scratch) -> Snapshot:
        return {
            what: [row for row in rows if row[0] in Base.metadata.tables]
            for what, rows in snapshot(db).items()
            if what in aspects
        }

    migrations, models = declared(migrated), declared(from_models)
    assert migrations["columns"], "no declared table in the migrated database"
    diff = changes(migrations, models, aspects)
    assert diff == [], "models (gained/lost) against migrations:\n" + "\n".join(diff)


def _describe(diff: Any) -> str:
    """One line per difference, indexes as SQL (their repr shows only object addresses)."""
    if isinstance(diff, tuple) and diff[0] in ("add_index", "remove_index"):
        index = diff[1]
        parts = ", ".join(str(e) for e in index.expressions)
        return f"{diff[0]} {index.name} ON {index.table.name} ({parts})"
    return str(diff)
