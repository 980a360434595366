"""The console's small things of its second round (issue 32): the runs list shows each run's
error, a favicon, and no "Log out" where nobody logged in."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.console.conftest import TOKEN, insert_run
from tests.console.test_security import client, csrf_of


def test_the_runs_list_shows_each_runs_error(runtime: Any, db: Any, tmp_path: Path) -> None:
    failed = insert_run(db, status="FAILED", error_code="SMTP_TEMPFAIL", error="421 try later")
    fine = insert_run(db, status="COMPLETED")
    with client(runtime, tmp_path) as c:
        page = c.get("/runs").text
    assert "<th>error</th>" in page
    row = next(r for r in page.split("<tr>") if failed in r)
    assert "SMTP_TEMPFAIL" in row
    assert "badge bad" not in next(r for r in page.split("<tr>") if fine in r)


def test_log_out_only_for_someone_who_logged_in_and_a_favicon(runtime: Any, tmp_path: Path) -> None:
    with client(runtime, tmp_path) as local:  # no auth configured: loopback only, nobody to log out
        page = local.get("/").text
        assert "Log out" not in page
        assert 'rel="icon"' in page
        icon = local.get("/static/favicon.svg")
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    with client(runtime, tmp_path, token=TOKEN) as authed:
        authed.headers["Authorization"] = f"Bearer {TOKEN}"
        assert "Log out" in authed.get("/").text


def test_an_operator_cancels_a_queued_run_from_its_page_audited_and_only_in_their_orgs(
    runtime: Any, db: Any, tmp_path: Path
) -> None:
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    queued = insert_run(db, org_id=mine, status="QUEUED", attempt=0)
    done = insert_run(db, org_id=mine, status="COMPLETED")
    their = insert_run(db, org_id=theirs, status="QUEUED", attempt=0)
    status = "SELECT status FROM job_runs WHERE job_id = %s"
    with client(runtime, tmp_path, token=TOKEN, token_operator="ops", orgs=str(mine)) as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        page = c.get(f"/runs/{queued}").text
        assert "Cancel this run" in page
        assert "Cancel this run" not in c.get(f"/runs/{done}").text  # nothing to cancel
        token = csrf_of(page)
        assert c.post("/cancel", data={"job_id": queued}).status_code == 403  # no CSRF token
        answer = c.post(
            "/cancel", data={"csrf": token, "job_id": queued, "next": f"/runs/{queued}"}
        )
        assert answer.status_code == 303 and "canceled" in answer.headers["location"]
        assert c.post("/cancel", data={"csrf": token, "job_id": their}).status_code == 404
    assert db.execute(status, (queued,)).fetchone() == ("CANCELED",)
    assert db.execute(status, (their,)).fetchone() == ("QUEUED",)
    assert db.execute(
        "SELECT actor, action, target FROM console_audit WHERE action = 'run-cancel'"
    ).fetchall() == [("ops", "run-cancel", queued)]


def test_a_bulk_cancel_of_a_filter_is_a_dry_run_until_confirmed_and_stays_in_its_orgs(
    runtime: Any, db: Any, tmp_path: Path
) -> None:
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    cancelable = [
        insert_run(db, org_id=mine, status=s, attempt=0) for s in ("QUEUED", "STAGED", "FAILED")
    ]
    finished = insert_run(db, org_id=mine, status="COMPLETED")
    their = insert_run(db, org_id=theirs, status="QUEUED", attempt=0)
    status = "SELECT status FROM job_runs WHERE job_id = %s"
    with client(runtime, tmp_path, token=TOKEN, token_operator="ops", orgs=str(mine)) as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        page = c.get("/runs", params={"job_name": "test:echo"}).text
        assert "Cancel the cancelable runs of this search" in page
        form = {"csrf": csrf_of(page), "f_job_name": "test:echo"}
        dry = c.post("/runs/cancel", data=form)
        assert dry.status_code == 200 and "Dry run: <strong>3</strong>" in dry.text
        assert all(db.execute(status, (j,)).fetchone() != ("CANCELED",) for j in cancelable)
        done = c.post("/runs/cancel", data={**form, "confirm": "1"})
        assert done.status_code == 303 and "canceled+3" in done.headers["location"]
    assert [db.execute(status, (j,)).fetchone()[0] for j in cancelable] == ["CANCELED"] * 3
    assert db.execute(status, (finished,)).fetchone() == ("COMPLETED",)
    assert db.execute(status, (their,)).fetchone() == ("QUEUED",)
    assert db.execute(
        "SELECT action, count FROM console_audit WHERE action = 'runs-cancel'"
    ).fetchall() == [("runs-cancel", 3)]
