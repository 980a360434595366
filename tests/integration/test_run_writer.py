"""The run writer's group commit against the real run store (shared/jobs/run_writer.py)."""

from __future__ import annotations

import os
import uuid
from typing import Any

import psycopg
import pytest

from shared.config import Settings
from shared.jobs.run_writer import Finish, RunWriter
from tests.support.jobs import message_info


def _plans(conn: psycopg.Connection[Any], statement: str) -> tuple[int, int]:
    row = conn.execute(
        "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements"
        " WHERE statement LIKE %s",
        (f"%{statement}%",),
    ).fetchone()
    assert row is not None and row[1] is not None, f"no prepared statement like {statement!r}"
    return int(row[0]), int(row[1])


@pytest.mark.skipif(
    os.environ.get("DATABASE_POOLER") == "transaction",
    reason="a direct connection's prepared statements: through a transaction-mode pooler "
    "nothing is prepared (shared/db/connect.py)",
)
def test_batches_are_planned_for_the_table_as_it_is_not_as_it_was(
    runtime: Any, settings: Settings
) -> None:
    """A generic plan cached while job_runs was small would join every later batch to the
    whole table by a sequential scan (FINISH took 6 ms a row at 150,000 rows)."""
    writer = RunWriter(lambda: psycopg.connect(settings.database_dsn, autocommit=True))
    try:
        for _ in range(12):  # psycopg prepares after 5; Postgres may go generic after 5 more
            job_id = f"plan:{uuid.uuid4().hex}"
            assert writer.start_run(message_info(job_id), 3) is not None
            writer.finish_run(Finish(job_id, "COMPLETED"))
        assert writer._durable._conn is not None  # the lanes are idle: their connections too
        assert writer._fast._conn is not None
        generic, custom = _plans(writer._durable._conn, "UPDATE job_runs AS r")
        assert (generic, custom) == (0, 12 - 5)
        generic, custom = _plans(writer._fast._conn, "INSERT INTO job_runs AS r")
        assert generic == 0 and custom > 0
    finally:
        writer.close()
