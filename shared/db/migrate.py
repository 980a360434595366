"""Apply the Alembic migrations shipped inside the packages (`fleet db upgrade`).

The kernel's revisions are in `shared/db/migrations/versions`; each domain ships its own in the
package its registration names (`Domain.migrations`, shared/domains.py), branching off the
kernel's first revision. Alembic reads every one of those directories.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

MIGRATIONS = Path(__file__).with_name("migrations")


def version_locations() -> list[str]:
    """The kernel's versions directory, then each registered domain's."""
    from shared.domains import migration_packages

    locations = [str(MIGRATIONS / "versions")]
    for package in migration_packages():
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(
                f"migrations package {package} not found (its domain's registration)"
            )
        locations.extend(spec.submodule_search_locations)
    return locations


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    # The separator is explicit: a path may hold spaces.
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", os.pathsep.join(version_locations()))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def admin_dsn(database_url: str) -> str:
    """A libpq DSN for the server's `postgres` database (to create or drop others)."""
    admin = make_url(database_url).set(database="postgres").render_as_string(hide_password=False)
    return admin.replace("postgresql+psycopg://", "postgresql://", 1)


def ensure_database(database_url: str) -> bool:
    """Create the database named in the URL when it does not exist; True when created."""
    import psycopg

    name = make_url(database_url).database
    with psycopg.connect(admin_dsn(database_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return False
        conn.execute(f'CREATE DATABASE "{name}"')  # name comes from our own settings
        return True


def upgrade(database_url: str, revision: str = "heads") -> None:
    """Apply every branch: the kernel revision and each domain's (they branch off 0001)."""
    ensure_database(database_url)
    command.upgrade(alembic_config(database_url), revision)
