"""Bulk actions on a Runs search across states (issue 32): retry and delete, with the bulk
cancel's flow (a dry run until confirmed, at most 1,000 an action, within the console's orgs,
audited)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from shared.console import dead
from tests.console.conftest import TOKEN, dead_echo, insert_run
from tests.console.test_security import client, csrf_of
from tests.support.wait import wait_for

STATUS = "SELECT status FROM job_runs WHERE job_id = %s"


def states_of(db: Any, job_ids: list[str]) -> list[str | None]:
    return [(db.execute(STATUS, (j,)).fetchone() or [None])[0] for j in job_ids]


def seed_every_state(db: Any, org: uuid.UUID) -> dict[str, str]:
    return {
        s: insert_run(db, org_id=org, status=s, request_id=f"bulk-{org}", attempt=1)
        for s in ("STAGED", "QUEUED", "RUNNING", "FAILED", "COMPLETED", "DEAD", "CANCELED")
    }


def test_a_bulk_delete_of_a_search_removes_its_finished_runs_only_after_a_dry_run(
    runtime: Any, db: Any, tmp_path: Path
) -> None:
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    runs = seed_every_state(db, mine)
    their = insert_run(db, org_id=theirs, status="COMPLETED", request_id=f"bulk-{mine}")
    with client(runtime, tmp_path, token=TOKEN, token_operator="ops", orgs=str(mine)) as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        page = c.get("/runs", params={"request_id": f"bulk-{mine}"}).text
        assert "Delete the finished runs" in page
        form = {"csrf": csrf_of(page), "f_request_id": f"bulk-{mine}"}
        dry = c.post("/runs/delete", data=form)
        assert dry.status_code == 200 and "Dry run: <strong>3</strong>" in dry.text
        assert None not in states_of(db, list(runs.values()))  # nothing deleted yet
        done = c.post("/runs/delete", data={**form, "confirm": "1"})
        assert done.status_code == 303 and "deleted+3+of+3" in done.headers["location"]
    left = dict(zip(runs, states_of(db, list(runs.values())), strict=True))
    assert left == {"STAGED": "STAGED", "QUEUED": "QUEUED", "RUNNING": "RUNNING",
                    "FAILED": "FAILED", "COMPLETED": None, "DEAD": None, "CANCELED": None}  # fmt: skip
    assert states_of(db, [their]) == ["COMPLETED"]  # another org's: not this console's
    assert db.execute(
        "SELECT action, count, target FROM console_audit WHERE action = 'purge'"
    ).fetchall() == [("purge", 3, f"search request_id=bulk-{mine}")]


def test_a_bulk_retry_of_a_search_replays_its_dead_and_canceled_runs_which_then_complete(
    runtime: Any, fleet: Any, db: Any, tmp_path: Path
) -> None:
    org = uuid.uuid4()
    died = dead_echo(db, org, "from the dead")
    canceled = dead_echo(db, org, "from the canceled")
    db.execute("UPDATE job_runs SET status = 'CANCELED', error_code = 'CANCELED',"
               " cancel_requested = TRUE WHERE job_id = %s", (canceled,))  # fmt: skip
    completed = insert_run(db, org_id=org, status="COMPLETED")
    with client(runtime, tmp_path, token=TOKEN, token_operator="ops") as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        form = {"csrf": csrf_of(c.get("/runs").text), "f_org_id": str(org)}
        dry = c.post("/runs/retry", data=form)
        assert "Dry run: <strong>2</strong>" in dry.text and "DEAD, CANCELED" in dry.text
        assert states_of(db, [died, canceled]) == ["DEAD", "CANCELED"]
        done = c.post("/runs/retry", data={**form, "confirm": "1"})
        assert "retried+2+of+2" in done.headers["location"]
    wait_for(lambda: states_of(db, [died, canceled]) == ["COMPLETED"] * 2, timeout=20,
             what="the retried runs to complete")  # fmt: skip
    assert states_of(db, [completed]) == ["COMPLETED"]  # not run a second time
    replays = db.execute(
        "SELECT job_id, replayed_by, previous_error_code FROM job_replays ORDER BY job_id"
    ).fetchall()
    assert sorted(replays) == sorted([(died, "ops", "SMTP_OUTAGE"), (canceled, "ops", "CANCELED")])
    assert db.execute(
        "SELECT action, count FROM console_audit WHERE action = 'replay'"
    ).fetchall() == [("replay", 2)]


def test_a_bulk_action_is_bounded_and_refuses_what_it_does_not_know(
    runtime: Any, db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = uuid.uuid4()
    runs = [insert_run(db, org_id=org, status="COMPLETED") for _ in range(5)]
    monkeypatch.setattr(dead, "BULK_LIMIT", 3)
    with client(runtime, tmp_path, token=TOKEN, token_operator="ops") as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        form = {"csrf": csrf_of(c.get("/runs").text), "f_org_id": str(org), "confirm": "1"}
        assert "deleted+3+of+3" in c.post("/runs/delete", data=form).headers["location"]
        assert "deleted+2+of+2" in c.post("/runs/delete", data=form).headers["location"]
        assert "no+run+to+delete" in c.post("/runs/delete", data=form).headers["location"]
        assert c.post("/runs/explode", data=form).status_code == 404
        bad = c.post("/runs/delete", data={**form, "f_q": "colour:red"})
        assert bad.status_code == 400 and "unknown field" in bad.text
    assert states_of(db, runs) == [None] * 5
