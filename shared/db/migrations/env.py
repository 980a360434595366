from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from shared.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    assert url
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        # Two processes starting at once (the launcher, CI) must not race on the DDL.
        connection.exec_driver_sql("SELECT pg_advisory_lock(727274)")
        try:
            context.configure(connection=connection, target_metadata=target_metadata)
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            connection.exec_driver_sql("SELECT pg_advisory_unlock(727274)")
            connection.commit()


run_migrations_online()
