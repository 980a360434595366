"""Apply the Alembic migrations shipped inside the package (`fleet db upgrade`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def ensure_database(database_url: str) -> bool:
    """Create the database named in the URL when it does not exist; True when created."""
    import psycopg

    url = make_url(database_url)
    name = url.database
    admin = url.set(database="postgres").render_as_string(hide_password=False)
    dsn = admin.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return False
        conn.execute(f'CREATE DATABASE "{name}"')  # name comes from our own settings
        return True


def upgrade(database_url: str, revision: str = "heads") -> None:
    """Apply every branch: the kernel revision and each domain's (they branch off 0001)."""
    ensure_database(database_url)
    command.upgrade(alembic_config(database_url), revision)
