"""The example product API (examples/product_api) under uvicorn, driven over HTTP like a frontend:
real Redis and Postgres, the export worker as a `dramatiq workers.export.app` process, the outbox
relay running only when a test says so."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from shared.config import Settings
from tests.support.env import test_env
from tests.support.procs import Proc, free_port
from tests.support.relay import relaying
from tests.support.wait import wait_for

PRODUCT_API = "product-api"  # the example's extra process (examples/product_api/registration.py)


pytestmark = pytest.mark.slow

KEY_A, KEY_B, KEY_PLAIN = "test-key-a", "test-key-b", "test-key-a-plain"
PDF = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"


@dataclass
class Api:
    url: str
    proc: Proc
    org_a: uuid.UUID
    org_b: uuid.UUID

    def client(self, key: str | None = KEY_A) -> httpx.Client:
        headers = {"X-API-Key": key} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def start_api(tmp: Path, name: str, extra: dict[str, str]) -> Api:
    org_a, org_b = uuid.uuid4(), uuid.uuid4()
    keys = {
        KEY_A: {"org": str(org_a), "name": "a", "admin": True},
        KEY_PLAIN: {"org": str(org_a), "name": "a-plain"},
        KEY_B: {"org": str(org_b), "name": "b", "admin": True},
    }
    port = free_port()
    env = {**os.environ, **test_env(), "PRODUCT_API_KEYS": json.dumps(keys), **extra}
    argv = [
        sys.executable, "-m", "uvicorn", "examples.product_api.app:create_app", "--factory",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    proc = Proc(argv, env=env, log_path=tmp / f"{name}.log")
    api = Api(f"http://127.0.0.1:{port}", proc, org_a, org_b)

    def up() -> bool:
        if not proc.alive():
            raise AssertionError(f"{name} exited:\n{proc.log()[-3000:]}")
        try:
            return httpx.get(f"{api.url}/openapi.json", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(up, timeout=60, interval=0.2, what=f"{name} answering")
    return api


@pytest.fixture(scope="module")
def storage_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("storage")
    return {"STORAGE_LOCAL_ROOT": str(root), "STORAGE_SIGNING_KEY": "k" * 32}


@pytest.fixture(scope="module")
def api(
    database: str, storage_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    tmp = tmp_path_factory.mktemp("product-api")
    server = start_api(tmp, "api", storage_env)
    worker = Proc(
        [sys.executable, "-m", "dramatiq", "workers.export.app", "--processes", "1", "--threads", "2",
         "--skip-logging"],
        env={**os.environ, **test_env(), **storage_env, "dramatiq_worker_timeout": "50"},
        log_path=tmp / "worker-export.log",
    )  # fmt: skip
    yield server
    worker.close()
    server.proc.close()


def visible(client: httpx.Client, job_id: str) -> bool:
    return client.get(f"/jobs/{job_id}").status_code == 200


def follow(client: httpx.Client, events_url: str) -> list[dict[str, Any]]:
    """The status events of a job's SSE stream, until the server closes it (terminal state)."""
    events: list[dict[str, Any]] = []
    with client.stream("GET", events_url, timeout=httpx.Timeout(60, read=60)) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
    return events


def test_an_export_is_accepted_at_once_followed_over_sse_to_completed_then_downloaded(
    api: Api, settings: Settings
) -> None:
    with api.client() as a:
        answer = a.post("/exports", json={"type": "JOB_RUNS", "params": {"format": "CSV"}})
        assert answer.status_code == 202, answer.text
        body = answer.json()
        export_id, job_id = body["id"], body["job_id"]
        assert body["status_url"] == f"/jobs/{job_id}"
        # Committed, staged in the outbox, not published yet (no relay): no link, but the job
        # is known at once (issue 30: its status_url used to answer 404 until the relay ran).
        assert a.get(f"/exports/{export_id}").json()["status"] == "PENDING"
        not_ready = a.get(f"/exports/{export_id}/download")
        assert not_ready.status_code == 409 and not_ready.json()["code"] == "INVALID_STATE"
        staged = a.get(body["status_url"])
        assert staged.status_code == 200 and staged.json()["status"] == "STAGED"
        with a.stream("GET", body["events_url"]) as stream:  # an EventSource would not give up
            assert stream.status_code == 200
            first = next(line for line in stream.iter_lines() if line.startswith("data: "))
            assert json.loads(first.removeprefix("data: "))["status"] == "STAGED"

        with relaying(settings):
            wait_for(lambda: visible(a, job_id), timeout=15, what="the relay publishing")
            events = follow(a, body["events_url"])

        assert events[-1]["status"] == "COMPLETED" and events[-1]["terminal"] is True
        assert {e["job_id"] for e in events} == {job_id}
        assert a.get(f"/exports/{export_id}").json()["status"] == "COMPLETED"
        link = a.get(f"/exports/{export_id}/download")
        assert link.status_code == 200, link.text
        assert "sig=" in link.json()["url"] and link.json()["expires_in"] > 0


def test_org_b_cannot_see_cancel_or_replay_org_a_jobs_through_any_route(
    api: Api, settings: Settings, db: psycopg.Connection[Any]
) -> None:
    with api.client(KEY_A) as a, api.client(KEY_B) as b, relaying(settings):
        email = a.post(
            "/emails",
            json={
                "template_key": "welcome",
                "recipient_email": "ada@example.com",
                "variables": {"NAME": "Ada"},
            },
        ).json()
        document = a.post(
            "/documents",
            files={"file": ("zephyr.pdf", PDF, "application/pdf")},
            data={"schema": "invoice"},
        ).json()
        task = a.post(
            "/ai/tasks",
            json={"task": "classify", "input": "late invoice", "params": {"labels": ["x", "y"]}},
        ).json()
        export = a.post("/exports", json={"type": "JOB_RUNS", "params": {"format": "XLSX"}}).json()
        jobs = [email["job_id"], document["job_id"], task["job_id"], export["job_id"]]
        wait_for(
            lambda: all(visible(a, job_id) for job_id in jobs), timeout=15, what="jobs published"
        )
        # A page of A's document, indexed as the doc worker would (no doc worker in this test).
        db.execute(
            "INSERT INTO document_pages (document_id, page, org_id, status, text, language)"
            " VALUES (%s, 1, %s, 'DONE', 'Quarterly zephyr invoice for the harbour', 'en')",
            (document["id"], api.org_a),
        )
        db.execute(
            "UPDATE document_pages SET tsv_en = to_tsvector('english', text) WHERE document_id = %s",
            (document["id"],),
        )
        db.execute(
            "UPDATE job_runs SET status = 'DEAD', error_code = 'TEST_DEAD', finished_at = now()"
            " WHERE job_id = %s",
            (email["job_id"],),
        )

        for job_id in jobs:
            assert b.get(f"/jobs/{job_id}").status_code == 404
            assert b.post(f"/jobs/{job_id}/cancel").status_code == 404
            assert b.get(f"/jobs/{job_id}/events").status_code == 404
            assert b.post(f"/jobs/dead-letters/{job_id}/replay").status_code == 404
        assert not {
            j["job_id"] for j in b.get("/jobs", params={"limit": 200}).json()["items"]
        } & set(jobs)
        assert b.get("/jobs/dead-letters").json()["items"] == []
        assert b.get(f"/exports/{export['id']}").status_code == 404
        assert b.get(f"/exports/{export['id']}/download").status_code == 404
        assert b.get(f"/documents/{document['id']}").status_code == 404
        assert b.get(f"/ai/tasks/{task['id']}").status_code == 404
        assert b.get("/documents/search", params={"q": "zephyr"}).json()["items"] == []

        # ... while A sees, searches, cancels and replays its own.
        assert a.get(f"/documents/{document['id']}").json()["status"] == "UPLOADED"
        hits = a.get("/documents/search", params={"q": "zephyr"}).json()["items"]
        assert [h["document_id"] for h in hits] == [document["id"]]
        assert "«zephyr»" in hits[0]["pages"][0]["snippet"].lower()
        assert a.get(f"/ai/tasks/{task['id']}").json()["task"] == "classify"
        canceled = a.post(f"/jobs/{task['job_id']}/cancel")
        assert canceled.status_code == 200 and canceled.json()["status"] == "CANCELED"
        assert [j["job_id"] for j in a.get("/jobs/dead-letters").json()["items"]] == [
            email["job_id"]
        ]
        with api.client(KEY_PLAIN) as plain:  # a key without the admin right
            assert plain.post(f"/jobs/dead-letters/{email['job_id']}/replay").status_code == 403
        replayed = a.post(f"/jobs/dead-letters/{email['job_id']}/replay")
        assert replayed.status_code == 200, replayed.text
        assert replayed.json()["replayed_by"] == "api-key:a"
        assert a.get(f"/jobs/{email['job_id']}").json()["status"] == "QUEUED"


def test_bad_input_is_422_with_field_paths_and_unknown_ids_404(api: Api) -> None:
    with api.client() as a:
        bad_type = a.post("/exports", json={"type": "NO_SUCH", "params": {}})
        bad_body = a.post("/emails", json={"template_key": "welcome"})
        bad_search = a.get("/documents/search")

        assert bad_type.status_code == 422 and bad_type.json()["detail"][0]["loc"] == [
            "body",
            "type",
        ]
        assert bad_body.status_code == 422
        assert ["body", "recipient_email"] in [e["loc"] for e in bad_body.json()["detail"]]
        assert bad_search.status_code == 422 and bad_search.json()["detail"][0]["loc"] == [
            "query",
            "q",
        ]
        assert a.get("/exports/not-a-uuid").status_code == 422
        assert a.get(f"/exports/{uuid.uuid4()}").status_code == 404
        assert a.get(f"/exports/{uuid.uuid4()}/download").status_code == 404
        assert a.get(f"/documents/{uuid.uuid4()}").status_code == 404
        assert a.get(f"/ai/tasks/{uuid.uuid4()}").status_code == 404
        assert a.get("/jobs/no-such-job").status_code == 404
    with api.client(None) as anonymous:
        assert anonymous.post("/exports", json={"type": "JOB_RUNS"}).status_code == 401
        ready = anonymous.get("/health/ready")
        assert ready.status_code == 200 and ready.json()["checks"] == {
            "redis": "ok",
            "postgres": "ok",
        }


def test_redis_down_a_direct_send_is_503_and_the_outbox_path_still_accepts(
    database: str, storage_env: dict[str, str], tmp_path: Path, db: psycopg.Connection[Any]
) -> None:
    closed = f"redis://127.0.0.1:{free_port()}/0"
    down = start_api(tmp_path, "api-redis-down", {**storage_env, "REDIS_URL": closed})
    try:
        with down.client() as a:
            direct = a.post(
                "/emails",
                json={"template_key": "welcome", "recipient_email": "direct@example.com",
                      "variables": {"NAME": "D"}, "direct": True},
            )  # fmt: skip
            staged = a.post(
                "/emails",
                json={
                    "template_key": "welcome",
                    "recipient_email": "outbox@example.com",
                    "variables": {"NAME": "O"},
                },
            )
            ready = a.get("/health/ready")
    finally:
        down.proc.close()

    assert direct.status_code == 503, direct.text
    assert direct.json()["code"] == "BROKER_UNAVAILABLE"
    assert "Nothing was saved" in direct.json()["detail"]
    assert staged.status_code == 202, staged.text
    assert ready.status_code == 503 and ready.json()["checks"]["postgres"] == "ok"
    assert "ConnectionError" in ready.json()["checks"]["redis"]
    rows = db.execute(
        "SELECT recipient_email FROM scheduled_emails WHERE org_id = %s", (down.org_a,)
    ).fetchall()
    assert rows == [("outbox@example.com",)]
    event = db.execute(
        "SELECT status FROM outbox_events WHERE job_id = %s", (staged.json()["job_id"],)
    ).fetchone()
    assert event == ("PENDING",)


def test_the_launcher_supervises_the_api_on_its_port(tmp_path: Path) -> None:
    """`make run` starts the example API as one more supervised process (here alone, with
    `--only product-api`): ready on `PRODUCT_API_PORT`, stopped by SIGTERM."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="jobfleet-launch-") as var:  # see test_launcher.py
        launcher = Proc(
            [
                sys.executable,
                "-m",
                "shared.launcher",
                "run",
                "--only",
                PRODUCT_API,
                "--var-dir",
                var,
            ],
            env={
                **os.environ,
                **test_env(),
                "PRODUCT_API_PORT": str(port),
                "PYTHONUNBUFFERED": "1",
            },
            log_path=tmp_path / "launcher.log",
        )
        try:
            url = f"http://127.0.0.1:{port}"

            def ready() -> bool:
                assert launcher.alive(), launcher.log()[-3000:]
                try:
                    return httpx.get(f"{url}/health/ready", timeout=2).status_code == 200
                except httpx.TransportError:
                    return False

            wait_for(ready, timeout=90, interval=0.3, what="the API ready under the launcher")
            answer = httpx.post(
                f"{url}/exports", json={"type": "JOB_RUNS"}, headers={"X-API-Key": "dev-key-org-a"}
            )
            assert answer.status_code == 202, answer.text
            wait_for(lambda: "example product API" in launcher.log(), what="the summary line")
            assert f"{url}/health/ready" in launcher.log()

            launcher.send_signal(signal.SIGTERM)
            assert launcher.wait(40) == 0, launcher.log()[-3000:]
        finally:
            launcher.close()
