"""The console's small things of its second round (issue 32): the runs list shows each run's
error, a favicon, and no "Log out" where nobody logged in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.console.conftest import TOKEN, insert_run
from tests.console.test_security import client


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
