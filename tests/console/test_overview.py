"""The Overview's figures from real rows: per-queue running/dead/done per minute, durations per
job over the last hour, the DLQ alert past the maintenance threshold, the outbox backlog."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.console import fleet
from shared.runtime import Runtime
from tests.console.conftest import insert_run


def test_the_overview_counts_and_times_the_runs(runtime: Runtime, db: Any, tmp_path: Path) -> None:
    org, other = uuid.uuid4(), uuid.uuid4()
    now = datetime.now(UTC)
    for ms in range(1, 101):  # durations 1..100 ms, finished in the last hour
        start = now - timedelta(minutes=30)
        insert_run(db, org_id=org, job_name="email:send", queue="email", started_at=start,
                   finished_at=start + timedelta(milliseconds=ms))  # fmt: skip
    insert_run(db, org_id=org, job_name="email:send", queue="email", started_at=now - timedelta(hours=3),
               finished_at=now - timedelta(hours=2))  # fmt: skip  # too old to count
    for _ in range(3):
        insert_run(db, org_id=other, job_name="ai:run", queue="ai", status="DEAD",
                   started_at=now - timedelta(seconds=20), finished_at=now - timedelta(seconds=10))  # fmt: skip
    insert_run(db, org_id=org, job_name="ai:run", queue="ai", status="RUNNING", started_at=now)
    db.execute(
        "INSERT INTO outbox_events (org_id, type, job_name, job_id, payload, status, created_at)"
        " VALUES (%s, 'x', 'email:send', 'o1', '{}', 'PENDING', now() - interval '90 s')",
        (org,),
    )

    o = fleet.overview(runtime, state_file=tmp_path / "none.json")
    queues = {q["queue"]: q for q in o["queues"]}
    assert (queues["ai"]["running"], queues["ai"]["dead"], queues["ai"]["per_minute"]) == (1, 3, 3)
    assert queues["email"]["dead"] == 0 and queues["email"]["paused"] is None
    by_job = {d["job_name"]: d for d in o["durations"]}
    email = by_job["email:send"]
    assert email["runs"] == 100 and email["dead"] == 0
    assert email["p50_ms"] == pytest.approx(50.5, abs=0.01)
    assert email["p95_ms"] == pytest.approx(95.05, abs=0.01)
    assert by_job["ai:run"]["dead"] == 3 and by_job["ai:run"]["p50_ms"] == pytest.approx(10_000)
    assert o["alert"] == {"threshold": 100, "over": [], "dead": 3, "firing": False}
    assert o["outbox"]["pending"] == 1 and o["outbox"]["oldest_pending_s"] >= 89

    # Scoped to one org, the figures are that org's.
    mine = fleet.overview(runtime, state_file=tmp_path / "none.json", orgs=(org,))
    assert {q["queue"]: q["dead"] for q in mine["queues"]}["ai"] == 0
    assert "ai:run" not in {d["job_name"] for d in mine["durations"]}


def test_the_dlq_alert_fires_past_the_maintenance_threshold(runtime: Runtime, db: Any) -> None:
    threshold = runtime.settings.maintenance_dlq_threshold
    db.execute(
        "INSERT INTO job_runs (org_id, job_name, job_id, queue, status)"
        " SELECT gen_random_uuid(), 'doc:ocr', 'dead-' || g, 'doc', 'DEAD'"
        " FROM generate_series(1, %s) AS g",
        (threshold + 1,),
    )
    rows = fleet.queues(runtime)
    assert fleet.dlq_alert(rows, threshold)["over"] == ["doc"]
    assert fleet.dlq_alert(rows, threshold)["firing"] is True


def test_the_overview_shows_each_queues_concurrency_limits(
    runtime: Runtime, tmp_path: Path
) -> None:
    from shared import limits

    limits.set_limit(runtime, "export", 4, by="ops", reason="")
    limits.set_limit(runtime, "export", 2, per_org=True, by="ops", reason="")
    o = fleet.overview(runtime, state_file=tmp_path / "none.json")
    queues = {q["queue"]: q for q in o["queues"]}
    assert queues["export"]["limits"] == "queue 4, per org 2"
    assert queues["email"]["limits"] == ""
