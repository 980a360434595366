"""Issue 23 in the console: the scheduler's periodic jobs (as its replicas report them) paused,
resumed and run now from the Overview, audited like `fleet schedule` (pause_audit) and in the
console's own audit."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared import periodic
from shared.pauses import redis_client
from shared.runtime import Runtime
from tests.console.test_security import client, csrf_of

HEADERS = {"Authorization": "Basic b3BzOnB3"}  # ops:pw


@pytest.fixture
def ops(runtime: Runtime, tmp_path: Path) -> Iterator[TestClient]:
    with client(runtime, tmp_path, user="ops", password="pw") as c:
        c.headers.update(HEADERS)
        yield c


def test_periodic_jobs_are_paused_resumed_and_run_now_from_the_overview(
    ops: TestClient, runtime: Runtime, db: Any
) -> None:
    redis, ns = redis_client(runtime), runtime.settings.broker_namespace
    now = datetime.now(UTC)
    for job in ("maintenance", "outbox-relay"):  # what a scheduler replica records each pass
        periodic.record_run(redis, ns, job, at=now, outcome="ok", duration_ms=3.0, next_at=now)
    page = ops.get("/").text
    assert "maintenance" in page and "outbox-relay" in page
    token = csrf_of(page)

    answer = ops.post("/schedule/maintenance/pause", data={"csrf": token, "reason": "incident 42"})
    assert answer.status_code == 303 and "paused+maintenance" in answer.headers["location"]
    assert periodic.paused_jobs(redis, ns) == {"maintenance"}
    assert "PAUSED" in ops.get("/overview/live").text
    assert ops.post("/schedule/maintenance/resume", data={"csrf": token}).status_code == 303
    assert periodic.paused_jobs(redis, ns) == set()
    assert ops.post("/schedule/outbox-relay/run-now", data={"csrf": token}).status_code == 303
    (state,) = periodic.states(redis, ns, ["outbox-relay"])
    assert state.run_now_requested

    # A job no replica reported is unknown; a pause without a reason is refused.
    assert ops.post("/schedule/nope/pause", data={"csrf": token, "reason": "x"}).status_code == 404
    assert ops.post("/schedule/maintenance/pause", data={"csrf": token}).status_code == 400

    assert db.execute("SELECT action, target, actor FROM pause_audit ORDER BY id").fetchall() == [
        ("pause", "maintenance", "ops"),
        ("resume", "maintenance", "ops"),
        ("run-now", "outbox-relay", "ops"),
    ]
    audit = db.execute("SELECT action, target FROM console_audit ORDER BY id").fetchall()
    assert audit == [
        ("schedule-pause", "maintenance"),
        ("schedule-resume", "maintenance"),
        ("schedule-run-now", "outbox-relay"),
    ]
    assert "schedule-run-now" in ops.get("/audit").text
