"""The console's guards over HTTP: no start off loopback without auth, auth on every page,
mutations only by POST with the page's CSRF token from the console's own origin, and a console
restricted to some orgs sees and touches only theirs."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared.console.app import create_app
from shared.console.settings import ConsoleSettings, UnsafeBind
from shared.runtime import Runtime
from tests.console.conftest import TOKEN, dead_echo, insert_run

URL = "http://127.0.0.1:8190"


def client(runtime: Runtime, tmp_path: Path, **settings: Any) -> TestClient:
    app = create_app(
        ConsoleSettings(**settings), runtime=lambda: runtime, state_file=tmp_path / "fleet.json"
    )
    return TestClient(app, base_url=URL, follow_redirects=False)


@pytest.fixture
def ops(runtime: Runtime, tmp_path: Path) -> Iterator[TestClient]:
    with client(runtime, tmp_path, token=TOKEN, token_operator="ops") as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        yield c


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF token in the page"
    return found.group(1)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "console.example.com", "::"])
def test_off_loopback_the_console_refuses_to_start_without_auth(host: str) -> None:
    with pytest.raises(UnsafeBind, match="without auth"):
        create_app(ConsoleSettings(host=host))
    create_app(ConsoleSettings(host=host, token="t"))  # with a token it starts
    create_app(ConsoleSettings(host=host, user="ops", password="pw"))  # or basic auth
    for loopback in ("127.0.0.1", "localhost", "::1"):
        create_app(ConsoleSettings(host=loopback))


def test_every_page_needs_auth_and_basic_auth_names_the_operator(
    runtime: Runtime, tmp_path: Path, db: Any
) -> None:
    dead = dead_echo(db, uuid.uuid4())
    with client(runtime, tmp_path, user="alice", password="s3cret") as c:
        for path in ("/", "/overview/live", "/runs", f"/runs/{dead}", "/dead", "/outbox",
                     "/tenants", "/chain", "/audit"):  # fmt: skip
            answer = c.get(path)
            assert answer.status_code == 401, path
            assert answer.headers["WWW-Authenticate"].startswith("Basic")
            assert dead not in answer.text
        wrong = base64.b64encode(b"alice:nope").decode()
        assert c.get("/", headers={"Authorization": f"Basic {wrong}"}).status_code == 401
        right = {"Authorization": "Basic " + base64.b64encode(b"alice:s3cret").decode()}
        page = c.get(f"/runs/{dead}", headers=right)
        assert page.status_code == 200 and "alice" in page.text
        answer = c.post(
            "/dead/replay", headers=right, data={"job_id": dead, "csrf": csrf_of(page.text)}
        )
        assert answer.status_code == 303
    assert db.execute("SELECT replayed_by FROM job_runs WHERE job_id = %s", (dead,)).fetchone() == (
        "alice",
    )
    assert db.execute("SELECT actor, action, count FROM console_audit").fetchall() == [
        ("alice", "replay", 1)
    ]


def test_a_wrong_token_is_refused_and_the_health_routes_answer_without_auth(
    runtime: Runtime, tmp_path: Path
) -> None:
    with client(runtime, tmp_path, token=TOKEN) as c:
        assert c.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert c.post("/login", data={"token": "nope"}).status_code == 401
        assert c.get("/health/ready").status_code == 200
        assert c.get("/health/live").status_code == 200


def test_without_auth_configured_only_a_loopback_host_header_is_served(
    runtime: Runtime, tmp_path: Path
) -> None:
    """No DNS rebinding onto an unauthenticated loopback console."""
    with client(runtime, tmp_path) as c:
        assert c.get("/").status_code == 200
        assert c.get("/", headers={"Host": "attacker.example:8190"}).status_code == 403


def test_mutations_need_post_the_csrf_token_and_the_consoles_own_origin(
    ops: TestClient, db: Any
) -> None:
    dead = dead_echo(db, uuid.uuid4())
    token = csrf_of(ops.get("/dead").text)
    assert ops.get("/dead/replay", params={"job_id": dead}).status_code == 405
    assert ops.post("/dead/replay", data={"job_id": dead}).status_code == 403
    assert ops.post("/dead/replay", data={"job_id": dead, "csrf": "forged"}).status_code == 403
    cross = ops.post(
        "/dead/replay", data={"job_id": dead, "csrf": token},
        headers={"Origin": "https://attacker.example"},
    )  # fmt: skip
    assert cross.status_code == 403
    for path in ("/queues/email/pause", "/schedule/maintenance/run-now", "/outbox/retry"):
        assert ops.post(path, data={"reason": "x"}).status_code == 403, path
    assert db.execute("SELECT status FROM job_runs").fetchone() == ("DEAD",)
    assert db.execute("SELECT count(*) FROM console_audit").fetchone() == (0,)
    # The header form of the token (htmx requests) is accepted like the form field.
    ok = ops.post("/dead/replay", data={"job_id": dead}, headers={"X-CSRF-Token": token})
    assert ok.status_code == 303
    assert db.execute("SELECT status FROM job_runs").fetchone() == ("QUEUED",)


def test_a_bulk_replay_is_a_dry_run_until_confirmed(ops: TestClient, db: Any) -> None:
    org = uuid.uuid4()
    ids = [dead_echo(db, org, message=f"m{i}") for i in range(3)]
    token = csrf_of(ops.get("/dead").text)
    form = {"csrf": token, "scope": "filter", "f_org_id": str(org)}
    dry = ops.post("/dead/replay", data=form)
    assert dry.status_code == 200 and "Dry run: <strong>3</strong>" in dry.text
    assert {r[0] for r in db.execute("SELECT status FROM job_runs")} == {"DEAD"}
    done = ops.post("/dead/replay", data={**form, "confirm": "1"})
    assert done.status_code == 303 and "replayed+3" in done.headers["location"]
    statuses = db.execute("SELECT status FROM job_runs WHERE job_id = ANY(%s)", (ids,))
    assert {r[0] for r in statuses} == {"QUEUED"}
    # Purge: the same dry run, then the rows are gone.
    purge_ids = [dead_echo(db, org, message=f"p{i}") for i in range(2)]
    form = {"csrf": token, "scope": "selection", "job_id": purge_ids}
    assert "Dry run: <strong>2</strong>" in ops.post("/dead/purge", data=form).text
    assert ops.post("/dead/purge", data={**form, "confirm": "1"}).status_code == 303
    assert db.execute(
        "SELECT count(*) FROM job_runs WHERE job_id = ANY(%s)", (purge_ids,)
    ).fetchone() == (0,)


def test_a_console_restricted_to_an_org_sees_and_acts_on_that_org_only(
    runtime: Runtime, tmp_path: Path, db: Any
) -> None:
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    my_dead, their_dead = dead_echo(db, mine), dead_echo(db, theirs)
    their_secret = insert_run(db, org_id=theirs, request_id="their-request")
    with client(runtime, tmp_path, token=TOKEN, orgs=str(mine)) as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        runs = c.get("/runs").text
        assert my_dead in runs and their_dead not in runs and their_secret not in runs
        assert c.get(f"/runs/{their_dead}").status_code == 404
        assert their_dead not in c.get("/dead").text
        assert c.get("/runs", params={"request_id": "their-request"}).text.count("/runs/") == 0
        token = csrf_of(c.get("/dead").text)
        answer = c.post("/dead/replay", data={"csrf": token, "job_id": their_dead})
        assert "no+dead+run" in answer.headers["location"]
        everything = c.post("/dead/replay", data={"csrf": token, "scope": "filter", "confirm": "1"})
        assert "replayed+1" in everything.headers["location"]
        assert c.post("/queues/email/pause", data={"csrf": token, "reason": "x"}).status_code == 403
        assert "Pause" not in c.get("/").text
    status = "SELECT status FROM job_runs WHERE job_id = %s"
    assert db.execute(status, (their_dead,)).fetchone() == ("DEAD",)
    assert db.execute(status, (my_dead,)).fetchone() == ("QUEUED",)
