"""The scheduler's minute jobs: `email-seq:run_due` once per minute slot across replicas, and the
run store's maintenance wired to its settings (retention, DLQ threshold)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.process import build_scheduler
from scheduler.settings import indexer_settings, keeper_settings, scheduler_settings
from scheduler.upkeep import maintain
from shared import maintenance, run_stats
from shared.runtime import Runtime
from workers.email.periodic import run_due as run_due_emails
from workers.email.periodic import slot
from workers.email.settings import email_settings

NIL = "00000000-0000-0000-0000-000000000000"


def test_the_slot_is_the_minute_in_utc() -> None:
    assert slot(datetime(2026, 11, 29, 22, 41, 59, tzinfo=UTC)) == "2026-11-29T22:41Z"


def test_two_triggers_in_one_minute_send_one_run_due_job(runtime: Runtime, db: Any) -> None:
    t = datetime(2026, 11, 29, 22, 41, 3, tzinfo=UTC)
    first = run_due_emails(runtime, t)
    second = run_due_emails(runtime, t + timedelta(seconds=40))  # another replica, same minute
    third = run_due_emails(runtime, t + timedelta(minutes=1))
    assert not first.duplicate and second.duplicate and second.job_id == first.job_id
    assert not third.duplicate and third.job_id != first.job_id


def test_maintenance_purges_past_retention_and_flags_a_dlq_over_its_threshold(
    runtime: Runtime, db: Any
) -> None:
    now = datetime.now(UTC)
    old = now - timedelta(days=runtime.settings.run_retention_days + 1)
    rows = [("done-old", "COMPLETED", old), ("done-new", "COMPLETED", now)]
    rows += [(f"dead-{i}", "DEAD", old) for i in range(3)]
    for job_id, status, finished in rows:
        db.execute(
            "INSERT INTO job_runs (org_id, job_name, job_id, queue, status, finished_at, created_on)"
            " VALUES (%s, 'email:send', %s, 'email', %s, %s, %s)",
            (NIL, job_id, status, finished, finished.date()),
        )
    rt = Runtime(runtime.settings.model_copy(update={"maintenance_dlq_threshold": 2}))
    try:
        done = maintain(rt, now)
    finally:
        rt.close()
    assert done.purged == 1 and done.over_threshold == ["email"]
    assert done.dead_by_queue == {"email": 3}
    left = {r[0] for r in db.execute("SELECT job_id FROM job_runs")}
    assert left == {"done-new", "dead-0", "dead-1", "dead-2"}


def test_the_schedule_runs_every_job_alone_at_its_configured_interval(runtime: Runtime) -> None:
    s = scheduler_settings()
    jobs = {job.id: job for job in build_scheduler(runtime).get_jobs()}
    expected = {
        "outbox-relay": s.outbox_relay_interval_ms / 1000,
        "chain-indexer": indexer_settings().interval_ms / 1000,
        "lottery-keeper": keeper_settings().interval_ms / 1000,
        "email-run-due": email_settings().due_interval_s,
        "maintenance": s.maintenance_interval_s,
        "recovery": maintenance.RECOVERY_INTERVAL_S,
        "run-stats": run_stats.INTERVAL_S,
    }
    assert {k: j.trigger.interval.total_seconds() for k, j in jobs.items()} == expected
    assert all(j.max_instances == 1 and j.coalesce for j in jobs.values())
