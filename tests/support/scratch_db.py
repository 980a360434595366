"""An empty database of its own for a test that changes the schema (migrations, partitions)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from shared.config import Settings


@dataclass(frozen=True)
class Scratch:
    url: str  # SQLAlchemy URL (alembic)
    dsn: str  # libpq DSN (psycopg)


def _sibling(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


@contextmanager
def scratch_database(settings: Settings, purpose: str) -> Iterator[Scratch]:
    """An empty database with a unique name, dropped on exit."""
    name = f"jobfleet_{purpose}_{uuid.uuid4().hex[:12]}"
    db = Scratch(_sibling(settings.database_url, name), _sibling(settings.database_dsn, name))
    admin = _sibling(settings.database_dsn, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield db
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
