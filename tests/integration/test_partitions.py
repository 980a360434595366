"""`job_runs` and `job_executions` partitioned by day (migration 0020_partitioned_runs), each
test in a database of its own (it changes partitions):

- the migration of a populated table keeps every row, column for column, and every query of
  the console, the status API and the run writer uses the same index as before it (EXPLAIN);
- retention drops whole day partitions (not rows), keeps the newer ones, and moves what the
  cutoff does not reach (DEAD runs, unfinished runs, their executions) to the default partition;
- a row of a day without a partition lands in the default partition, and moves into that day's
  partition when the maintenance creates it;
- a run keeps the day it was first written: the run writer's statements update it in its
  partition rather than writing a second row for the same job id.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from alembic import command

from shared import maintenance
from shared.api import queries
from shared.config import Settings
from shared.console import search
from shared.db.connect import connect_kwargs
from shared.db.migrate import alembic_config, upgrade
from shared.jobs import run_writer
from shared.runtime import Runtime
from tests.support.plans import indexes_used
from tests.support.scratch_db import Scratch, scratch_database

REVISION = "0020_partitioned_runs"
#: The index of the partitioned table that took over each index of the table before it.
RENAMED = {"uq_job_runs_job_id": "uq_job_runs_job_id_created_on"}
ORG = uuid.UUID(bytes=bytes.fromhex("11" * 16))
ROWS = 40_000

POPULATE = f"""
INSERT INTO job_runs (org_id, job_name, job_id, queue, status, entity_type, entity_id, payload,
                      request_id, error_code, queued_at, started_at, finished_at, lease_owner)
SELECT CASE WHEN g % 4 = 0 THEN '{ORG}'::uuid ELSE md5('org' || (g % 300))::uuid END,
       (ARRAY['email:send', 'ai:run', 'doc:ocr', 'export:build'])[1 + g % 4],
       'run:' || g, (ARRAY['email', 'ai', 'doc', 'export'])[1 + g % 4], s.status, 'invoice',
       'inv-' || g, jsonb_build_object('n', g), CASE WHEN g % 2 = 0 THEN 'req-' || g END,
       CASE WHEN s.status = 'DEAD' THEN 'SMTP_REJECTED' END, now() - g * interval '60 s',
       now() - g * interval '60 s', CASE WHEN s.status IN ('COMPLETED', 'DEAD')
                                          THEN now() - g * interval '59 s' END,
       CASE WHEN s.status = 'RUNNING' THEN 'host:1:w' END
  FROM generate_series(1, {ROWS}) AS g,
       LATERAL (SELECT CASE WHEN g % 50 = 0 THEN 'DEAD' WHEN g % 97 = 0 THEN 'RUNNING'
                            WHEN g % 89 = 0 THEN 'QUEUED' ELSE 'COMPLETED' END AS status) AS s;
INSERT INTO job_executions (job_id, execution, attempt, worker, message_id, started_at)
SELECT 'run:' || g, 1, 1, 'host:1:w', 'm' || g, now() - g * interval '60 s'
  FROM generate_series(1, {ROWS}, 2) AS g;
ANALYZE job_runs;
ANALYZE job_executions;
"""
#: Every row, every column (but the new one), in one digest per table.
DIGEST = {
    "job_runs": "SELECT count(*), md5(string_agg((to_jsonb(r) - 'created_on')::text, ','"
    " ORDER BY r.job_id)) FROM job_runs AS r",
    "job_executions": "SELECT count(*), md5(string_agg(to_jsonb(x)::text, ',' ORDER BY x.id))"
    " FROM job_executions AS x",
}


#: Each index to the table's index it belongs to (a partition's index to the partitioned one).
def _connect(settings: Settings, dsn: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """DATABASE_POOLER=transaction: nothing prepared."""
    return psycopg.connect(dsn, **kwargs, **connect_kwargs(settings))


def _today() -> date:
    return datetime.now(UTC).date()


@pytest.fixture
def scratch(settings: Settings) -> Iterator[Scratch]:
    with scratch_database(settings, "partitions") as db:
        upgrade(db.url, "heads")
        yield db


@pytest.fixture
def scratch_runtime(settings: Settings, scratch: Scratch) -> Iterator[Runtime]:
    rt = Runtime(settings.model_copy(update={"database_url": scratch.url}))
    yield rt
    rt.close()


def _record(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """The statements run through psycopg from now on (the console's, the status API's)."""
    seen: list[tuple[str, Any]] = []
    execute = psycopg.Cursor.execute

    def recording(self: psycopg.Cursor[Any], query: Any, params: Any = None, **kw: Any) -> Any:
        seen.append((str(query), params))
        return execute(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    return seen


def _indexes_used(conn: psycopg.Connection[Any], sql: str, params: Any) -> set[str]:
    return {RENAMED.get(name, name) for name in indexes_used(conn, sql, params)}


def _writer_statements() -> dict[str, tuple[str, Any]]:
    """The run writer's statements on existing runs, with parameters that name a few."""
    ids = ["run:42", "run:4242"]
    finish = json.dumps([{"j": j, "s": "COMPLETED", "fin": True} for j in ids])
    lease = {"ids": ids, "w": "host:1:w", "ls": 30.0, "released": run_writer.RELEASED}
    one = {"j": "run:97", "a": 2, "ma": 3, "m": "m2", "w": "host:2:w", "ls": 30.0}
    return {
        "writer: finish": (run_writer.FINISH_MANY, (finish, ids)),
        "writer: blocked": (run_writer.BLOCKED, (ids,)),
        "writer: release": (run_writer.RELEASE, lease),
        "writer: takeover": (run_writer.TAKEOVER, one),
        "writer: bury": (run_writer.BURY, {"j": "run:97", "ec": "X", "er": "x"}),
        "writer: progress": (run_writer.PROGRESS, ('{"done": 1}', None, "run:42", "host:1:w")),
    }


def _reads(rt: Runtime) -> list[Callable[[], object]]:
    """The console's Runs searches and run page, the status API's list and event stream."""
    dead = search.RunFilter.parse({}, status="DEAD")
    flt = search.RunFilter.parse
    return [
        lambda: search.page(rt, flt({})),
        lambda: search.page(rt, flt({"org_id": str(ORG)})),
        lambda: search.page(rt, flt({"job_name": "doc:ocr"})),
        lambda: search.page(rt, flt({"status": "RUNNING"})),
        lambda: search.page(rt, flt({"entity_id": "inv-4242"})),
        lambda: search.page(rt, flt({"request_id": "req-4242"})),
        lambda: search.page(rt, dead),
        lambda: search.run_detail(rt, "run:4243"),
        lambda: queries.page(rt, org_id=ORG, filters=queries.Filters(), limit=50),
        lambda: queries.page(
            rt,
            org_id=ORG,
            filters=queries.Filters(entity_type="invoice", entity_id="inv-4244"),
            limit=50,
        ),
        lambda: queries.page(rt, org_id=ORG, filters=queries.Filters(status="DEAD"), limit=50),
        lambda: queries.state(rt, "run:4244", org_id=ORG),
    ]


def test_the_migration_keeps_every_row_and_every_index_in_use(
    settings: Settings,
    scratch: Scratch,
    scratch_runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = alembic_config(scratch.url)
    command.downgrade(cfg, "0019_outbox_priority")  # the table as it was, then filled
    with _connect(settings, scratch.dsn, autocommit=True) as conn:
        conn.execute(POPULATE)
        before = {table: conn.execute(sql).fetchone() for table, sql in DIGEST.items()}
    seen = _record(monkeypatch)
    for read in _reads(scratch_runtime):
        read()
    monkeypatch.undo()
    statements = {
        f"read {n}: {sql[:60]}": (sql, params)
        for n, (sql, params) in enumerate(seen)
        if "job_runs" in sql or "job_executions" in sql
    } | _writer_statements()
    with _connect(settings, scratch.dsn) as conn:
        plans_before = {k: _indexes_used(conn, *statement) for k, statement in statements.items()}
    assert all(plans_before.values()), f"a statement used no index before: {plans_before}"

    command.upgrade(cfg, "heads")

    with _connect(settings, scratch.dsn, autocommit=True) as conn:
        after = {table: conn.execute(sql).fetchone() for table, sql in DIGEST.items()}
        assert after == before
        assert before["job_runs"][0] == ROWS  # type: ignore[index]
        kind = conn.execute(
            "SELECT relname, relkind FROM pg_class WHERE relname IN ('job_runs', 'job_executions')"
        ).fetchall()
        assert dict(kind) == {"job_runs": "p", "job_executions": "p"}
        conn.execute("ANALYZE job_runs")
        conn.execute("ANALYZE job_executions")
        plans_after = {k: _indexes_used(conn, *statement) for k, statement in statements.items()}
        # A lease renewal finds its runs by job id, then each by its whole primary key.
        renew = {"ids": ["run:42"], "w": "host:1:w", "ls": 30.0}
        assert _indexes_used(conn, run_writer.RENEW, renew) >= {
            "uq_job_runs_job_id_created_on",
            "pk_job_runs",
        }
        # A run's first write finds its day, then its row, by the unique job id index.
        for name in ("START_MANY", "QUEUED_MANY"):
            plan = conn.execute(
                "EXPLAIN (FORMAT JSON) " + getattr(run_writer, name), ("[]",)
            ).fetchone()[0][0]["Plan"]  # type: ignore[index]
            assert "uq_job_runs_job_id_created_on" in json.dumps(plan), name
    # Each index a statement used is still used (an empty partition may be read by another).
    lost = {
        k: (plans_before[k], plans_after[k])
        for k in statements
        if not plans_before[k] <= plans_after[k]
    }
    assert lost == {}, "(indexes before, after) of each statement that lost an index"


def _partitions(conn: psycopg.Connection[Any], table: str) -> set[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = %s::regclass",
        (table,),
    ).fetchall()
    return {r[0] for r in rows}


def _run(conn: psycopg.Connection[Any], job_id: str, day: date, status: str, **cols: Any) -> None:
    at = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=12)
    finished = cols.get("finished_at", at if status in ("COMPLETED", "CANCELED", "DEAD") else None)
    conn.execute(
        "INSERT INTO job_runs (org_id, job_name, job_id, queue, status, queued_at, finished_at,"
        " created_on) VALUES (%s, 'email:send', %s, 'email', %s, %s, %s, %s)",
        (ORG, job_id, status, at, finished, day),
    )
    conn.execute(
        "INSERT INTO job_executions (job_id, execution, attempt, worker, started_at)"
        " VALUES (%s, 1, 1, 'w', %s)",
        (job_id, at),
    )


def test_retention_drops_whole_days_and_keeps_what_the_cutoff_does_not_reach(
    settings: Settings, scratch: Scratch, scratch_runtime: Runtime
) -> None:
    today = _today()
    days = scratch_runtime.settings.run_retention_days
    old, edge, kept = (
        today - timedelta(days + 5),
        today - timedelta(days + 1),
        today - timedelta(days),
    )
    with _connect(settings, scratch.dsn, autocommit=True) as conn:
        conn.execute("SELECT jobfleet_create_partitions(%s, %s)", (old, today))
        for n in range(3):
            _run(conn, f"old-done-{n}", old, "COMPLETED")
            _run(conn, f"edge-done-{n}", edge, "COMPLETED")
            _run(conn, f"kept-done-{n}", kept, "COMPLETED")
        _run(conn, "old-dead", old, "DEAD")
        _run(conn, "old-running", old, "RUNNING")
        _run(conn, "old-done-lately", old, "COMPLETED", finished_at=datetime.now(UTC))
        expired = {f"{t}_p{d:%Y%m%d}" for t in ("job_runs", "job_executions") for d in (old, edge)}
        assert expired <= _partitions(conn, "job_runs") | _partitions(conn, "job_executions")

    dropped = maintenance.drop_expired_partitions(scratch_runtime, now=datetime.now(UTC))

    assert set(dropped) == {
        f"{t}_p{d:%Y%m%d}"
        for t in ("job_runs", "job_executions")
        for d in (old + timedelta(n) for n in range((edge - old).days + 1))
    }
    with _connect(settings, scratch.dsn, autocommit=True) as conn:
        for table in ("job_runs", "job_executions"):
            left = _partitions(conn, table)
            assert not left & set(dropped)
            assert {f"{table}_p{d:%Y%m%d}" for d in (kept, today)} <= left
            assert f"{table}_default" in left
        runs = dict(
            conn.execute("SELECT job_id, tableoid::regclass::text FROM job_runs").fetchall()
        )
        survivors = {"old-dead", "old-running", "old-done-lately"}
        assert runs == {j: "job_runs_default" for j in survivors} | {
            f"kept-done-{n}": f"job_runs_p{kept:%Y%m%d}" for n in range(3)
        }
        executions = dict(
            conn.execute("SELECT job_id, tableoid::regclass::text FROM job_executions").fetchall()
        )
        assert executions == {j: "job_executions_default" for j in survivors} | {
            f"kept-done-{n}": f"job_executions_p{kept:%Y%m%d}" for n in range(3)
        }
    # Nothing more to drop: the next pass is a no-op.
    assert maintenance.drop_expired_partitions(scratch_runtime, now=datetime.now(UTC)) == []


def test_a_day_without_partition_lands_in_the_default_one_and_moves_when_it_is_created(
    settings: Settings, scratch: Scratch, scratch_runtime: Runtime
) -> None:
    later = _today() + timedelta(
        days=scratch_runtime.settings.maintenance_partitions_ahead_days + 2
    )
    with _connect(settings, scratch.dsn, autocommit=True) as conn:
        _run(conn, "far-ahead", later, "QUEUED")
        where = "SELECT tableoid::regclass::text FROM {} WHERE job_id = 'far-ahead'"
        assert conn.execute(where.format("job_runs")).fetchone() == ("job_runs_default",)
        conn.execute("SELECT jobfleet_create_partitions(%s, %s)", (later, later))
        assert conn.execute(where.format("job_runs")).fetchone() == (f"job_runs_p{later:%Y%m%d}",)
        assert conn.execute(where.format("job_executions")).fetchone() == (
            f"job_executions_p{later:%Y%m%d}",
        )
        assert conn.execute("SELECT count(*) FROM job_runs_default").fetchone() == (0,)
    # The maintenance's own pass (today and the days ahead) creates what is missing only.
    assert maintenance.ensure_partitions(scratch_runtime) == 0


def test_a_run_keeps_its_day_and_its_single_row_when_written_again(
    settings: Settings, scratch: Scratch
) -> None:
    yesterday = _today() - timedelta(days=1)
    with _connect(settings, scratch.dsn, autocommit=True) as conn:
        conn.execute("SELECT jobfleet_create_partitions(%s, %s)", (yesterday, yesterday))
        _run(conn, "staged-yesterday", yesterday, "STAGED")
        queued = json.dumps([{"o": str(ORG), "n": "email:send", "j": "staged-yesterday",
                              "q": "email", "m": "m1", "t": 1.0}])  # fmt: skip
        conn.execute(run_writer.QUEUED_MANY, (queued,))
        start = json.dumps([{"o": str(ORG), "n": "email:send", "j": "staged-yesterday",
                             "q": "email", "a": 1, "m": "m1", "w": "host:1:w", "ls": 30.0}])  # fmt: skip
        assert [r[0] for r in conn.execute(run_writer.START_MANY, (start,))] == ["staged-yesterday"]
        rows = conn.execute(
            "SELECT status, created_on, tableoid::regclass::text FROM job_runs"
            " WHERE job_id = 'staged-yesterday'"
        ).fetchall()
        assert rows == [("RUNNING", yesterday, f"job_runs_p{yesterday:%Y%m%d}")]
        # A job id seen for the first time takes today.
        conn.execute(run_writer.START_MANY, (start.replace("staged-yesterday", "fresh"),))
        assert conn.execute(
            "SELECT created_on FROM job_runs WHERE job_id = 'fresh'"
        ).fetchone() == (_today(),)


def test_two_first_writes_of_a_job_id_on_two_days_meet_in_one_row(
    settings: Settings, scratch: Scratch
) -> None:
    """A first write whose day was yesterday (its transaction began before midnight) and one
    made today: the second waits for the first's job id lock, then finds its row and its day.
    Without the lock, or with the statement's own snapshot, it would write a second row in
    today's partition (the unique index is per partition)."""
    yesterday = _today() - timedelta(days=1)
    queued = json.dumps([{"o": str(ORG), "n": "email:send", "j": "midnight", "q": "email",
                          "m": "m1", "t": 1.0}])  # fmt: skip
    with _connect(settings, scratch.dsn, autocommit=True) as admin:
        admin.execute("SELECT jobfleet_create_partitions(%s, %s)", (yesterday, yesterday))
    with _connect(settings, scratch.dsn) as first, _connect(settings, scratch.dsn) as second:
        first.execute("SELECT jobfleet_run_created_on('midnight')")  # the lock, as a write takes it
        _run(first, "midnight", yesterday, "STAGED")
        done = threading.Event()

        def write_again() -> None:
            second.execute(run_writer.QUEUED_MANY, (queued,))
            second.commit()
            done.set()

        thread = threading.Thread(target=write_again)
        thread.start()
        assert not done.wait(1.0), "the second write did not wait for the first one's lock"
        first.commit()
        assert done.wait(10)
        thread.join()
        rows = first.execute(
            "SELECT status, created_on FROM job_runs WHERE job_id = 'midnight'"
        ).fetchall()
        assert rows == [("QUEUED", yesterday)]
