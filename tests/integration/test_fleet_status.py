"""`fleet status` reads each figure from its source: queue lists and heartbeats in Redis, dead
runs and the outbox in Postgres (scheduler counters from a `/metrics` page:
tests/scheduler/test_status.py)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis

from shared import limits
from shared.broker.consumer import fetch
from shared.cli import status
from shared.config import Settings
from shared.contracts import SYSTEM_ORG
from shared.jobs import catalog
from shared.runtime import Runtime


def test_report_shows_ready_and_dead_jobs_fresh_heartbeats_and_the_outbox_backlog(
    runtime: Runtime, settings: Settings, db: Any, tmp_path: Path
) -> None:
    payload = {"org_id": SYSTEM_ORG, "slot": "2026-01-01T00:00Z"}
    runtime.sender.send(catalog.EMAIL_SEQ_RUN_DUE, payload)  # no worker: it stays ready
    runtime.sender.flush()
    db.execute(
        "INSERT INTO job_runs (id, org_id, job_name, job_id, queue, status, payload, attempt)"
        " VALUES (gen_random_uuid(), %s, 'doc:ocr', 'dead-1', 'doc', 'DEAD', '{}', 5)",
        (SYSTEM_ORG,),
    )
    db.execute(
        "INSERT INTO outbox_events (id, org_id, type, job_name, job_id, payload, status, attempts,"
        " created_at) VALUES (%s, %s, 'x', 'ai:run', 'o-1', '{}', 'PENDING', 0, now() - interval '30 s')",
        (uuid.uuid4(), SYSTEM_ORG),
    )
    client = redis.Redis.from_url(settings.redis_url)
    beats = f"{settings.broker_namespace}:__heartbeats__"
    now_ms = time.time() * 1000
    client.zadd(beats, {"fresh": now_ms, "gone": now_ms - 10 * settings.heartbeat_timeout_ms})
    client.close()

    report = status.collect(settings, tmp_path / "run" / "fleet.json")

    assert report["queues"]["email"] == {
        "ready": 1,
        "delayed": 0,
        "dead": 0,
        "paused": None,
        "server": home_server(settings),
        "running": 0,
        "limit": None,
        "per_org": None,
        "orgs": {},
        "running_by_org": {},
    }
    assert report["queues"]["doc"]["dead"] == 1
    assert report["workers"]["heartbeats"] == {"alive": 1, "stale": 1, "dead_consumers": {}}
    assert report["workers"]["processes"] == []  # no `make run` state here
    assert report["outbox"]["pending"] == 1 and report["outbox"]["oldest_pending_s"] >= 29
    assert report["indexer"]["cursor"] is None
    # Concurrency limits (issue 37): the operator's and the settings', and who runs what.
    limits.set_limit(runtime, "export", 4, by="ops", reason="db load")
    fetch(runtime.broker, "email", 5)  # a worker takes the email job: it runs, for the fleet
    limited = status.collect(
        settings.model_copy(update={"org_concurrency": {"export": 2}}),
        tmp_path / "run" / "fleet.json",
    )
    assert (limited["queues"]["export"]["limit"], limited["queues"]["export"]["per_org"]) == (4, 2)
    assert limited["queues"]["email"]["running"] == 1
    assert limited["queues"]["email"]["running_by_org"] == {str(SYSTEM_ORG): 1}


def home_server(settings: Settings) -> str:
    """REDIS_URL as `fleet status` names a server: host:port/db."""
    url = urlsplit(settings.redis_url)
    return f"{url.hostname}:{url.port or 6379}/{url.path.strip('/') or '0'}"


def test_an_unreachable_redis_is_reported_in_its_sections_only(
    runtime: Runtime, settings: Settings, tmp_path: Path
) -> None:
    broken = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    report = status.collect(broken, tmp_path / "fleet.json")
    assert "error" in report["queues"] and "error" in report["workers"]["heartbeats"]
    assert report["outbox"]["pending"] == 0


def test_postgres_connections_in_use_are_shown_against_max_connections(
    settings: Settings, db: Any, tmp_path: Path
) -> None:
    """Before: nothing showed them, and each process's pool was fixed at 16 (issue 31)."""
    held = Runtime(settings, kind="worker")
    try:
        with held.pool.connection():
            report = status.collect(settings, tmp_path / "fleet.json")
    finally:
        held.pool.close()
    pg = report["postgres"]
    (limit,) = db.execute("SHOW max_connections").fetchone()
    assert pg["max_connections"] == int(limit)
    assert pg["this_database"] >= 2  # this test's connection and the pool's
    assert 0 < pg["available"] < int(limit)

    from rich.console import Console

    from shared.cli import output

    console = Console(record=True, width=200)
    original, output.out = output.out, console
    try:
        status.render(report)
    finally:
        output.out = original
    assert f"of max_connections {limit} in use" in console.export_text()


def test_the_pool_size_is_a_setting_sized_by_process_kind(settings: Settings) -> None:
    sizes = {
        kind: Runtime(settings, kind=kind).pool_size for kind in ("worker", "scheduler", "other")
    }
    assert sizes == {"worker": 10, "scheduler": 6, "other": 8}
    small = Runtime(settings.model_copy(update={"db_pool_size": 3}), kind="worker")
    try:
        assert small.pool.max_size == 3  # the real pool, on the real server
    finally:
        small.pool.close()
