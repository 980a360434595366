"""The fleet through PgBouncer in transaction pooling mode (`DATABASE_POOLER=transaction`).

Each test's PgBouncer has ONE server connection, so whatever a client leaves on the server
(a prepared statement, a session SET) is met by the next client, deterministically. Before:
the producer pool's startup `options` were refused ("unsupported startup parameter: options"),
the run writer's `SET synchronous_commit TO off` stayed on the server connection and turned
other clients' commits asynchronous, and psycopg's automatic prepared statements of two
writers collided ("prepared statement "_pg3_0" already exists"). The whole integration suite
runs through a PgBouncer in CI too (.ci/pgbouncer-tests).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from shared.config import Settings
from shared.jobs import runs
from shared.runtime import Runtime, set_runtime
from tests.support import pgbouncer
from tests.support.jobs import ECHO
from tests.support.procs import Procs
from tests.support.wait import wait_for

pytestmark = pytest.mark.skipif(
    pgbouncer.binary() is None, reason="pgbouncer missing: bash shared/install_test_pgbouncer.sh"
)


@pytest.fixture
def bouncer(settings: Settings, database: str) -> Iterator[pgbouncer.PgBouncer]:
    target = make_url(settings.database_url).set(database=None)
    with pgbouncer.start(target.render_as_string(hide_password=False), pool_size=1) as bouncer:
        yield bouncer


def _pooled(settings: Settings, bouncer: pgbouncer.PgBouncer) -> Settings:
    name = make_url(settings.database_url).database
    return settings.model_copy(
        update={"database_url": f"{bouncer.url}/{name}", "database_pooler": "transaction"}
    )


def _echo(org: uuid.UUID, text: str) -> dict[str, object]:
    return {"v": 2, "org_id": str(org), "entity_id": str(uuid.uuid4()), "message": text}


def _server_state(bouncer: pgbouncer.PgBouncer, database: str) -> tuple[str, int]:
    """synchronous_commit and the prepared statements of the one server connection."""
    with psycopg.connect(bouncer.dsn(database), autocommit=True, prepare_threshold=None) as conn:
        sync = conn.execute("SHOW synchronous_commit").fetchone()
        prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert sync is not None and prepared is not None
    return str(sync[0]), int(prepared[0])


def test_two_producers_share_one_server_connection(runtime, settings, bouncer) -> None:
    pooled = _pooled(settings, bouncer)
    database = str(make_url(pooled.database_url).database)
    producers = [Runtime(pooled), Runtime(pooled)]
    org = uuid.uuid4()
    sent = []
    try:
        for round_ in range(8):  # psycopg would prepare a statement at its 5th execution
            for index, producer in enumerate(producers):
                previous = set_runtime(producer)
                try:
                    sent.append(ECHO.send(_echo(org, f"{round_}-{index}")).job_id)
                finally:
                    set_runtime(previous)
                assert producer.settle(10), producer.writer.last_error
        assert all(p.writer.healthy for p in producers), [p.writer.last_error for p in producers]
        assert _server_state(bouncer, database) == ("on", 0)
    finally:
        for producer in producers:
            producer.close()
    queued = [runs.find(job_id, org_id=org) for job_id in sent]
    assert [run.status if run else None for run in queued] == ["QUEUED"] * len(sent)


def test_a_worker_process_through_pgbouncer(runtime, settings, bouncer, procs: Procs) -> None:
    pooled = _pooled(settings, bouncer)
    database = str(make_url(pooled.database_url).database)
    producer = Runtime(pooled)
    previous = set_runtime(producer)
    org = uuid.uuid4()
    try:
        sent = [ECHO.send(_echo(org, f"job {n}")).job_id for n in range(30)]
        assert producer.settle(10), producer.writer.last_error
    finally:
        set_runtime(previous)
        producer.close()
    procs.worker(
        threads=4,
        env={"DATABASE_URL": pooled.database_url, "DATABASE_POOLER": "transaction"},
    )

    def completed() -> bool:
        found = [runs.find(job_id, org_id=org) for job_id in sent]
        return all(run is not None and run.status == "COMPLETED" for run in found)

    wait_for(completed, timeout=60, what="30 jobs COMPLETED through pgbouncer")
    assert _server_state(bouncer, database) == ("on", 0)
