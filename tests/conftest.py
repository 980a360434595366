from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.support.services import ensure as ensure_services

# Redis and Postgres first: the test URLs when they answer, else embedded servers started for this
# session (issue 21: `make test` on a machine where nothing runs). Before tests.support.env reads them.
SERVICES = ensure_services()

from tests.support.env import test_env  # noqa: E402

# Settings are read from the environment: point this session at its own database and namespace
# before anything builds them.
os.environ.update(test_env())

from shared.config import Settings, get_settings  # noqa: E402
from shared.runtime import Runtime, set_runtime  # noqa: E402
from tests.support.inprocess import InProcessWorker, started_workers  # noqa: E402


def pytest_report_header() -> list[str]:
    return SERVICES.describe()


def pytest_unconfigure() -> None:
    SERVICES.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `slow` tests first (in their order): spread over the xdist processes from the start,
    the long ones (a launched fleet, production time windows) do not end the run alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def settings() -> Settings:
    get_settings.cache_clear()
    return get_settings()


@pytest.fixture(scope="session")
def database(settings: Settings) -> Iterator[str]:
    from shared.db.connect import pooled
    from tests.support.template_db import create

    create(settings.database_url, pooled=pooled(settings))
    yield settings.database_dsn
    admin = settings.database_dsn.rsplit("/", 1)[0] + "/postgres"
    name = settings.database_dsn.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _clean(settings: Settings, dsn: str) -> None:
    import redis

    client = redis.Redis.from_url(settings.redis_url)
    keys = list(client.scan_iter(f"{settings.broker_namespace}:*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        # The tables that hold rows: a partitioned table (job_runs, job_executions) holds none
        # of its own, its partitions do. A TRUNCATE of job_runs, which truncates every partition
        # and index, cost ~45 ms; of the partition a test wrote to, ~9 ms.
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT quote_ident(c.relname) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'public' AND c.relkind = 'r'"
                " AND c.relname <> 'alembic_version'"
            )
        ]
        if not tables:
            return
        # Only the tables a test wrote to: a TRUNCATE of all of them (70) cost ~300 ms per
        # test, a sixth of the suite; telling which hold rows costs ~2 ms.
        probe = " UNION ALL ".join(
            f"SELECT {index} WHERE EXISTS (SELECT 1 FROM {name})"
            for index, name in enumerate(tables)
        )
        written = [tables[index] for (index,) in conn.execute(probe)]
        if written:
            conn.execute(f"TRUNCATE {', '.join(written)} CASCADE")


@pytest.fixture
def runtime(settings: Settings, database: str) -> Iterator[Runtime]:
    """A producer runtime on a clean database and an empty broker namespace."""
    _clean(settings, database)
    rt = Runtime(settings)
    previous = set_runtime(rt)
    yield rt
    set_runtime(previous)
    rt.close()


@pytest.fixture
def db(settings: Settings, database: str) -> Iterator[psycopg.Connection[Any]]:
    from shared.db.connect import connect_kwargs  # DATABASE_POOLER=transaction: nothing prepared

    with psycopg.connect(database, autocommit=True, **connect_kwargs(settings)) as conn:
        yield conn


class FleetWorker(InProcessWorker):
    """An in-process worker with the fleet's middleware, consuming `testq` on real Redis."""

    def __init__(self, settings: Settings) -> None:
        from tests.support.jobs import bind

        super().__init__(settings, service="test", bind=bind)


@pytest.fixture
def fleet(runtime: Runtime, settings: Settings) -> Iterator[FleetWorker]:
    """An in-process worker whose runtime is installed (so `.send()` goes to real Redis)."""
    with started_workers() as start:
        yield start(FleetWorker(settings))
