"""A run store that cannot be used: a database not migrated, Postgres down.

Before: a send to an unmigrated database retried `relation "job_runs" does not exist` for 13 s
and then enqueued a message with no run row; a worker on it logged `worker.ready`, answered
`/health/ready` 200 and failed every message. While Postgres was down, workers fetched, failed
to start and handed back every 3 s, writing thousands of tracebacks. Now: send and readiness
check the schema revision against the heads of the migration scripts and both say "database
not migrated: run `fleet db upgrade`"; a worker says it once and fetches nothing until it is;
while Postgres is down a worker stops fetching, logs one line per interval, and resumes.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from shared.config import Settings
from shared.db import schema
from shared.db.migrate import upgrade
from shared.errors import SchemaNotMigrated, TrackingUnavailable
from shared.runtime import Runtime
from tests.support.jobs import ECHO
from tests.support.procs import Procs, free_port
from tests.support.proxy import Proxy
from tests.support.queues import queued as waiting
from tests.support.wait import wait_for, wait_run

HINT = "database not migrated: run `fleet db upgrade`"


@pytest.fixture
def bare_url(settings: Settings, database: str) -> Iterator[str]:
    """An empty database beside the session's (same server), dropped at the end."""
    url = make_url(settings.database_url)
    name = f"{url.database}_bare"
    admin = settings.database_dsn.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield url.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _echo(org: str | None = None) -> dict[str, str]:
    return {
        "org_id": org or str(uuid.uuid4()),
        "entity_id": str(uuid.uuid4()),
        "message": "tracked",
    }


def _keys(runtime: Runtime) -> list[bytes]:
    return list(runtime.broker.client.scan_iter(f"{runtime.settings.broker_namespace}:*"))


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_check_compares_with_the_heads_of_the_scripts_not_a_fixed_revision() -> None:
    heads = schema.script_heads()
    assert len(heads) >= 5  # one per domain branch, whatever they are today
    assert schema.missing_heads(None) == sorted(heads)
    assert schema.missing_heads(frozenset({"0001"})) == sorted(heads)
    assert schema.missing_heads(frozenset(heads)) == []
    one = sorted(heads)[0]
    assert schema.missing_heads(frozenset(heads - {one} | {"0001"})) == [one]
    assert schema.missing_heads(frozenset({"a_newer_release_0099"})) == []  # ahead, not behind


def test_a_send_to_an_unmigrated_database_raises_and_enqueues_nothing(
    runtime: Runtime, settings: Settings, bare_url: str
) -> None:
    producer = Runtime(
        settings.model_copy(update={"database_url": bare_url}), broker=runtime.broker
    )
    try:
        started = time.monotonic()
        with pytest.raises(SchemaNotMigrated) as refused:
            producer.sender.send(ECHO, _echo())
        assert HINT in str(refused.value)
        assert time.monotonic() - started < 5  # before: 13 s of retries, then an enqueue
        assert _keys(runtime) == []

        upgrade(bare_url, "0001")  # the kernel's tables, but not every branch
        with pytest.raises(SchemaNotMigrated, match="missing: "):
            producer.sender.send(ECHO, _echo())
        assert _keys(runtime) == []

        upgrade(bare_url)
        sent = producer.sender.send(ECHO, _echo())  # the same process, once migrated
        assert not sent.duplicate
    finally:
        producer.close()


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_a_worker_on_an_unmigrated_database_is_not_ready_says_so_once_and_starts_once_migrated(
    runtime: Runtime, procs: Procs, bare_url: str
) -> None:
    port = free_port()
    worker = procs.worker(env={"DATABASE_URL": bare_url, "HEALTH_PORT": str(port)}, ready=False)
    # Before: it logged `worker.ready` while its /health/ready answered 503 (issue 31).
    said = wait_for(lambda: worker.events("worker.not_ready"), what="worker.not_ready")
    assert HINT in json.dumps(said[0]["failing"])
    ready = f"http://127.0.0.1:{port}/health/ready"
    status, body = _get(ready)
    assert status == 503 and HINT in json.dumps(body)

    sent = ECHO.send(_echo())  # recorded in the session's database, consumed by the worker
    time.sleep(2.5)
    ns = runtime.settings.broker_namespace
    assert waiting(runtime.broker.client, ns, "testq") == 1, "fetched with no run store to record"
    said = [e for e in worker.events("worker.database_not_migrated") if HINT in e.get("error", "")]
    assert len(said) == 1, worker.log()[-3000:]
    assert worker.events("run.start_not_recorded") == []

    assert worker.events("worker.ready") == []
    upgrade(bare_url)
    wait_for(lambda: _get(ready)[0] == 200, timeout=15, what="ready once migrated")
    wait_for(lambda: worker.events("worker.ready"), timeout=5, what="worker.ready once migrated")

    def completed() -> bool:
        with psycopg.connect(bare_url.replace("+psycopg", ""), autocommit=True) as conn:
            row = conn.execute(
                "SELECT status FROM job_runs WHERE job_id = %s", (sent.job_id,)
            ).fetchone()
        return row is not None and row[0] == "COMPLETED"

    wait_for(completed, timeout=15, what="the job run once the database is migrated")
    assert len(worker.events("worker.database_not_migrated")) == 1


@pytest.mark.slow  # spawns processes or waits on real time (make test-fast skips it)
def test_while_postgres_is_down_a_worker_stops_fetching_and_resumes_by_itself(
    runtime: Runtime, settings: Settings, procs: Procs
) -> None:
    url = make_url(settings.database_url)
    proxy = Proxy(free_port(), (url.host or "127.0.0.1", url.port or 5432))
    proxy.up()
    try:
        proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        worker = procs.worker(env={"DATABASE_URL": proxied})
        first = ECHO.send(_echo())
        wait_run(first.job_id, "COMPLETED")

        proxy.down()
        org = str(uuid.uuid4())
        sent = [ECHO.send(_echo(org)) for _ in range(5)]
        wait_for(lambda: worker.events("consumer.fetch_paused"), what="fetching paused")
        time.sleep(1)
        tried = len(worker.events("run.start_not_recorded"))
        time.sleep(4)  # longer than the 3 s hand-back: before, every message came back, failed
        assert len(worker.events("run.start_not_recorded")) == tried, worker.log()[-3000:]
        assert tried <= 5
        assert len(worker.events("consumer.fetch_paused")) == 1  # one line per 30 s interval
        assert "Traceback" not in worker.log()

        proxy.up()
        for s in sent:
            wait_run(s.job_id, "COMPLETED", timeout=20)
        # A run's start is kept in Redis (broker/starts.py): the runs fetched before the pause
        # ran, and their outcomes, retried, are durable once Postgres answers, whether or not
        # the idle consumers have probed it yet (at most every second).
        wait_for(
            lambda: worker.events("consumer.fetch_resumed"), timeout=10, what="fetching resumed"
        )
    finally:
        proxy.down()


def test_a_missing_table_in_a_migrated_database_still_fails_the_sends_loudly(
    runtime: Runtime, settings: Settings, bare_url: str
) -> None:
    """The schema check is no way around a failing writer: a table dropped by hand after the
    migrations (alembic_version says all is there) still makes the next sends raise."""
    upgrade(bare_url)
    with psycopg.connect(bare_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("DROP TABLE job_runs CASCADE")
    producer = Runtime(
        settings.model_copy(update={"database_url": bare_url}), broker=runtime.broker
    )
    try:
        producer.sender.send(ECHO, _echo())  # enqueued; its QUEUED row then fails
        wait_for(lambda: not producer.writer.healthy, what="the writer failing")
        queued = waiting(runtime.broker.client, runtime.settings.broker_namespace, "testq")
        with pytest.raises(TrackingUnavailable, match="job_runs"):
            producer.sender.send(ECHO, _echo())
        assert waiting(runtime.broker.client, runtime.settings.broker_namespace, "testq") == queued
    finally:
        producer.writer.close(1)  # its QUEUED row can never be written: don't wait for it
        producer.pool.close()
