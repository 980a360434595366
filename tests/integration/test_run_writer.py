"""The run writer's group commit against the real run store (shared/jobs/run_writer.py)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from shared.config import Settings
from shared.db.connect import run_writer
from shared.jobs.run_writer import Finish, Started
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
def test_batch_statements_are_planned_once_not_per_batch(runtime: Any, settings: Settings) -> None:
    """Planning a batch cost as much as running it (0.3 ms): the lanes prepare each statement
    at its first use and keep one generic plan. That this plan still finds the runs by job id
    however stale the statistics is the test below (a generic plan once joined every batch to
    the whole table: FINISH took 6 ms a row at 150,000 rows)."""
    writer = run_writer(settings)
    try:
        for _ in range(12):
            job_id = f"plan:{uuid.uuid4().hex}"
            assert writer.start_run(message_info(job_id), 3) is not None
            writer.finish_run(Finish(job_id, "COMPLETED"))
        assert writer._durable._conn is not None  # the lanes are idle: their connections too
        assert writer._fast._conn is not None
        assert _plans(writer._durable._conn, "UPDATE job_runs AS r") == (12, 0)
        generic, custom = _plans(writer._fast._conn, "INSERT INTO job_runs AS r")
        assert generic >= 12 and custom == 0
    finally:
        writer.close()


def _finish_plan(conn: psycopg.Connection[Any], job_ids: list[str], mode: str) -> str:
    """The plan Postgres makes for the writer's FINISH of `job_ids` (its statement, prepared,
    and its parameters: `_Lane._statements`), under `plan_cache_mode` `mode`."""
    from shared.jobs.run_writer import FINISH_MANY, _finish_params, _Op

    ops = [
        _Op("finish", {"j": j, "s": "COMPLETED", "fin": True, "w": "w:1:x"}, None) for j in job_ids
    ]
    params = _finish_params(ops)
    numbered = FINISH_MANY.replace("%s", "$1", 1).replace("%s", "$2", 1)
    assert "%s" not in numbered and len(params) == 2
    conn.execute(f"SET plan_cache_mode TO {mode}")
    conn.execute("DEALLOCATE ALL")
    conn.execute(f"PREPARE finish_plan(json, text[]) AS {numbered}")
    explain = sql.SQL("EXPLAIN EXECUTE finish_plan({}, {})").format(*map(sql.Literal, params))
    rows = conn.execute(explain).fetchall()  # a utility statement takes no bound parameters
    return "\n".join(str(row[0]) for row in rows)


@pytest.mark.skipif(
    os.environ.get("DATABASE_POOLER") == "transaction",
    reason="a session's temporary table and prepared statement: a transaction-mode pooler "
    "runs each statement on any server connection",
)
def test_finish_looks_its_runs_up_by_job_id_even_when_the_table_statistics_are_stale(
    runtime: Any, settings: Settings
) -> None:
    """A burst of sends leaves job_runs far bigger than its statistics say until autovacuum
    analyzes it: FINISH joined its batch to the table by a sequential scan of every row (7 ms
    for 4 runs at 20,000 rows, measured here), per batch, for the whole drain. Its plan must
    look each run up in the job id index whatever the statistics, custom or generic."""
    with psycopg.connect(settings.database_dsn, autocommit=True) as conn:
        # A temporary job_runs shadows the real one in this session: never analyzed, so its
        # statistics are as stale as they get once the rows are in.
        conn.execute("CREATE TEMP TABLE job_runs (LIKE public.job_runs INCLUDING ALL)")
        conn.execute(
            "INSERT INTO job_runs (org_id, job_name, job_id, queue, status)"
            " SELECT gen_random_uuid(), 'plan.job', 'plan:' || g, 'plan', 'RUNNING'"
            "   FROM generate_series(1, 20000) g"
        )
        job_ids = ["plan:1", "plan:2", "plan:3", "plan:4"]
        plans = {
            mode: _finish_plan(conn, job_ids, f"force_{mode}_plan")
            for mode in ("custom", "generic")
        }
        assert "$2" in plans["generic"] and "$2" not in plans["custom"]  # what was asked
    for mode, plan in plans.items():
        assert "Seq Scan on job_runs" not in plan, f"{mode} plan:\n{plan}"
        assert "job_id" in plan and "Index" in plan, f"{mode} plan:\n{plan}"


def test_terminal_outcomes_handed_over_within_the_linger_are_one_group_commit(
    runtime: Any, settings: Settings
) -> None:
    """Nobody but the acker waits for a COMPLETED row (the worker thread has moved on): the
    durable lane lets terminal outcomes gather for `finish_linger_ms` and makes them durable in
    one statement and one fsync, instead of one per two or three runs (issue 24: the drain went
    from 1,450 to 1,950 jobs/s). One statement: their `finished_at` (its `now()`) is one."""
    writer = run_writer(settings, finish_linger_ms=300)
    try:
        job_ids = [f"linger:{uuid.uuid4().hex}" for _ in range(5)]
        for job_id in job_ids:
            assert writer.start_run(message_info(job_id), 3) is not None
        waiters = []
        for job_id in job_ids:
            waiters.append(writer.submit_finish(Finish(job_id, "COMPLETED")))
            time.sleep(0.02)  # each later than a write takes here
        for waiter in waiters:
            waiter.result(10)
        with psycopg.connect(settings.database_dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT status, finished_at FROM job_runs WHERE job_id = ANY(%s)", (job_ids,)
            ).fetchall()
        assert [r[0] for r in rows] == ["COMPLETED"] * 5
        assert len({r[1] for r in rows}) == 1, rows
    finally:
        writer.close()


def _start_times(settings: Settings, job_ids: list[str]) -> list[Any]:
    with psycopg.connect(settings.database_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT started_at FROM job_runs WHERE job_id = ANY(%s)", (job_ids,)
        ).fetchall()
    return [row[0] for row in rows]


def test_starts_share_a_statement_while_the_writer_is_busy_and_never_wait_when_idle(
    runtime: Any, settings: Settings
) -> None:
    """Each worker thread waits for its start: while the fast lane is busy (its last write just
    ended), a start waits `start_linger_ms` for the other threads' starts and they share one
    statement (one `now()`: one `started_at`); after a pause the first start goes at once."""
    import concurrent.futures

    linger_s = 0.3
    writer = run_writer(settings, start_linger_ms=linger_s * 1000)
    try:
        time.sleep(2 * linger_s)  # idle
        first = f"linger:{uuid.uuid4().hex}"
        took = time.monotonic()
        assert writer.start_run(message_info(first), 3) is not None
        assert time.monotonic() - took < linger_s / 2, "an idle writer held a start"

        job_ids = [f"linger:{uuid.uuid4().hex}" for _ in range(4)]  # the lane is busy now

        def start(job_id: str) -> Any:
            return writer.start_run(message_info(job_id), 3)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = []
            for job_id in job_ids:
                futures.append(pool.submit(start, job_id))
                time.sleep(0.02)  # each later than a write takes here
            assert all(f.result(10) is not None for f in futures)
        assert len(set(_start_times(settings, job_ids))) == 1
        assert _start_times(settings, [first]) != _start_times(settings, job_ids[:1])
    finally:
        writer.close()


def test_a_backlog_of_queued_rows_is_written_without_lingering_between_full_batches(
    runtime: Any, settings: Settings
) -> None:
    """The fast lane lingers so that QUEUED rows gather into one statement, not when a whole
    batch is already waiting: a backlog is written batch after batch. (It lingered before each
    batch: at most `max_batch` rows per linger, fewer than a producer sends when Postgres is
    slow, and `flush` waited out the backlog.) 40 rows, batches of 4, a 1 s linger: ten lingers
    before, one or two now."""
    writer = run_writer(settings, linger_ms=1000, max_batch=4)
    try:
        job_ids = [f"backlog:{uuid.uuid4().hex}" for _ in range(40)]
        took = time.monotonic()
        for job_id in job_ids:
            writer.record_queued(_queued_op(job_id).params)
        assert writer.flush(6), "the backlog was not written within 6 s"
        assert time.monotonic() - took < 6
        with psycopg.connect(settings.database_dsn, autocommit=True) as conn:
            found = conn.execute(
                "SELECT count(*) FROM job_runs WHERE job_id = ANY(%s) AND status = 'QUEUED'",
                (job_ids,),
            ).fetchone()
        assert found is not None and found[0] == 40
    finally:
        writer.close()


def _queued_op(job_id: str) -> Any:
    from shared.jobs.run_writer import _Op

    row = {
        "o": str(uuid.uuid4()), "n": "test:echo", "j": job_id, "q": "testq", "et": "test",
        "e": None, "p": {"n": 1}, "r": None, "m": uuid.uuid4().hex, "t": time.time(),
    }  # fmt: skip
    return _Op("queued", row, None)


def _start_op(job_id: str) -> Any:
    from shared.jobs.run_writer import _Op

    info = message_info(job_id)
    row = {
        "w": "w:1:deadlock", "ls": 30.0, "o": info.org_id, "n": info.job_name, "j": job_id,
        "q": info.queue, "et": info.entity_type, "e": None, "p": info.payload, "a": 1, "ma": 3,
        "rq": None, "m": info.message_id,
    }  # fmt: skip
    return _Op("start", row, None)


@pytest.mark.skipif(
    os.environ.get("DATABASE_POOLER") == "transaction",
    reason="two direct sessions writing at once",
)
def test_a_producer_and_a_worker_writing_the_same_runs_never_deadlock(
    settings: Settings, database: str
) -> None:
    """A producer's QUEUED rows and a worker's starts of the same jobs (a job started before
    its QUEUED row is written) met in opposite orders: each statement held some of the job
    ids' index entries and waited for the other's, until Postgres's deadlock detection killed
    one a second later ("deadlock detected ... while inserting index tuple", several per
    200,000-job run of bench/memory.py, both lanes of the worker stalled meanwhile). Every
    batch statement now takes its rows in job id order."""
    import threading

    from shared.jobs.run_writer import _Lane

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(settings.database_dsn, autocommit=True)

    lanes = [
        _Lane(connect, durable=False, max_batch=500, linger_s=0, name=f"dl-{n}") for n in (1, 2)
    ]
    conns = [connect(), connect()]
    errors: list[BaseException] = []
    try:
        for conn in conns:
            conn.execute("SET lock_timeout TO '5s'")
        for _ in range(8):
            job_ids = [f"deadlock:{uuid.uuid4().hex}:{n:03}" for n in range(200)]
            batches = [
                [_queued_op(j) for j in job_ids],
                [_start_op(j) for j in reversed(job_ids)],
            ]
            ready = threading.Barrier(2)

            def write(n: int, batch: list[Any], ready: threading.Barrier = ready) -> None:
                ready.wait()
                try:
                    lanes[n]._statements(conns[n], batch)
                except BaseException as exc:  # collected: asserted below
                    errors.append(exc)

            threads = [threading.Thread(target=write, args=(n, b)) for n, b in enumerate(batches)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert errors == [], errors
    finally:
        for conn in conns:
            conn.close()


def test_renewing_leases_never_waits_for_a_run_another_statement_is_writing(
    runtime: Any, settings: Settings
) -> None:
    """The lease renewal and the durable lane's FINISH update the same rows (a finished run's
    lease is renewed until its outcome is durable), each in its own order: they deadlocked
    ("deadlock detected" between RENEW and FINISH_MANY in Postgres's log, several per suite),
    both lanes of the worker stalled for `deadlock_timeout` (1 s), and the fast lane then
    wrote its batch again (see the test below). A renewal now skips a row another statement
    holds: that run is being finished or taken over, and is still this worker's for now."""
    writer = run_writer(settings)
    try:
        job_ids = [f"renew:{uuid.uuid4().hex}" for _ in range(2)]
        for job_id in job_ids:
            assert isinstance(writer.start_run(message_info(job_id), 3), Started)
        with psycopg.connect(settings.database_dsn) as finishing:  # a transaction, held
            finishing.execute(
                "UPDATE job_runs SET status = 'COMPLETED' WHERE job_id = %s", (job_ids[1],)
            )
            took = time.monotonic()
            held = writer.renew(job_ids, timeout=5)
            took = time.monotonic() - took
            finishing.rollback()
        assert held == set(job_ids)
        assert took < 1, f"the renewal waited {took:.1f} s for a row lock"
    finally:
        writer.close()


@pytest.fixture
def fails_once(settings: Settings) -> Iterator[str]:
    """A statement that fails with a real `deadlock detected` (40P01) from the server the
    first time it runs, then returns no rows: it stands in for a batch's later statement."""
    name = f"jobfleet_test_fails_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(settings.database_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SEQUENCE {name}_calls")
        conn.execute(
            f"CREATE FUNCTION {name}(float8, text[], text) RETURNS SETOF text LANGUAGE plpgsql"
            f" AS $$ BEGIN IF nextval('{name}_calls') = 1 THEN RAISE EXCEPTION 'injected'"
            " USING ERRCODE = '40P01'; END IF; RETURN; END $$"
        )
    yield f"SELECT * FROM {name}(%s, %s, %s)"
    with psycopg.connect(settings.database_dsn, autocommit=True) as conn:
        conn.execute(f"DROP FUNCTION {name}(float8, text[], text)")
        conn.execute(f"DROP SEQUENCE {name}_calls")


def test_a_batch_written_again_after_a_transient_error_does_not_repeat_what_it_wrote(
    runtime: Any, settings: Settings, fails_once: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each statement of a batch is its own transaction: when a later one failed with a
    deadlock, the whole batch was written again, and its starts, written the first time,
    found their own runs RUNNING under a live lease: each delivery was told "run in flight"
    and deferred, never run (and, with Redis down at that moment, dead-lettered in Redis
    while its run stayed RUNNING for good: the Sentinel failover test's 7 stuck runs). Now
    only what did not commit is written again."""
    from shared.jobs import run_writer as module
    from shared.jobs.run_writer import _Op, _Waiter

    monkeypatch.setattr(module, "RENEW", fails_once)
    writer = run_writer(settings)
    try:
        job_id = f"retry:{uuid.uuid4().hex}"
        start = _Op("start", _start_op(job_id).params, _Waiter())
        renew = _Op("renew", (30.0, [job_id], "w:1:deadlock"), _Waiter())
        writer._fast._flush_once([start, renew])

        assert isinstance(start.future.result(5), Started)  # type: ignore[union-attr]
        assert renew.future.result(5) == set()  # type: ignore[union-attr]  # the second try
        with psycopg.connect(settings.database_dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT status, executions FROM job_runs WHERE job_id = %s", (job_id,)
            ).fetchone()
        assert row == ("RUNNING", 1)
    finally:
        writer.close()


def test_a_canceled_delivery_and_its_jobs_new_message_in_one_batch_start_the_new_one(
    settings: Settings, database: str
) -> None:
    """A canceled job sent again: its canceled message and its new one reached the worker at
    once and their starts shared a batch. The first (the canceled delivery) was the batch's
    start of that job id; refused, it made the new message skipped too ("already finished or
    canceled"): a job sent and accepted that never ran (test_reopen, under load)."""
    from shared.jobs.run_writer import _Lane

    job_id = f"reopen:{uuid.uuid4().hex}"
    canceled, new = _start_op(job_id), _start_op(job_id)
    with psycopg.connect(settings.database_dsn, autocommit=True) as conn:
        queued = _queued_op(job_id)
        queued.params["m"] = canceled.params["m"]
        lane = _Lane(
            lambda: psycopg.connect(settings.database_dsn, autocommit=True),
            durable=False, max_batch=10, linger_s=0, name="reopen",
        )  # fmt: skip
        lane._statements(conn, [queued])
        conn.execute("UPDATE job_runs SET status = 'CANCELED' WHERE job_id = %s", (job_id,))
        new.params["m"] = uuid.uuid4().hex

        results = lane._statements(conn, [canceled, new])

        assert results[0] is None  # the canceled delivery is skipped
        assert isinstance(results[1], Started)
        row = conn.execute(
            "SELECT status, message_id FROM job_runs WHERE job_id = %s", (job_id,)
        ).fetchone()
        assert row == ("RUNNING", new.params["m"])
