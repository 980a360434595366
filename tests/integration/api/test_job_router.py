"""The job-status router on real Redis and Postgres: scoped by the caller's org, typed, redacted."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from fastapi import FastAPI, Header, HTTPException
from fastapi.testclient import TestClient

from shared.api import job_router
from shared.jobs import runs
from shared.runtime import Runtime
from tests.support.jobs import ECHO, SLEEP
from tests.support.wait import wait_run


def caller_org(x_org: Annotated[str, Header()]) -> uuid.UUID:
    return uuid.UUID(x_org)


def caller_admin(x_admin: Annotated[str | None, Header()] = None) -> str:
    if not x_admin:
        raise HTTPException(403, "operators only")
    return x_admin


def caller_operator(x_operator: Annotated[str | None, Header()] = None) -> str:
    if not x_operator:
        raise HTTPException(403, "fleet operators only")
    return x_operator


def make_app(runtime: Runtime) -> FastAPI:
    app = FastAPI()
    app.include_router(
        job_router(
            org=caller_org,
            admin=caller_admin,
            operator=caller_operator,
            runtime=lambda: runtime,
            poll_interval_s=0.05,
        ),
        prefix="/jobs",
    )
    return app


@pytest.fixture
def api(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(make_app(runtime)) as client:
        yield client


def as_org(org: uuid.UUID, **extra: str) -> dict[str, str]:
    return {"X-Org": str(org), **extra}


def echo(org: uuid.UUID, message: str, **more: Any) -> dict[str, Any]:
    return {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": message, **more}


def test_a_job_is_read_by_its_org_with_secrets_redacted(api: TestClient) -> None:
    org = uuid.uuid4()
    sent = SLEEP.send(
        {"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 0, "marker": "m"}
    )
    sent_secret = ECHO.send(echo(org, "hello"))

    got = api.get(f"/jobs/{sent.job_id}", headers=as_org(org))

    assert got.status_code == 200, got.text
    body = got.json()
    assert (body["job_id"], body["status"], body["job_name"]) == (
        sent.job_id,
        "QUEUED",
        "test:sleep",
    )
    assert body["payload"]["marker"] == "m"
    assert (
        api.get(f"/jobs/{sent_secret.job_id}", headers=as_org(org)).json()["payload"]["message"]
        == "hello"
    )


def test_payload_values_under_secret_keys_are_redacted(api: TestClient, runtime: Runtime) -> None:
    org = uuid.uuid4()
    sent = SLEEP.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 0})
    runtime.settle()
    with runtime.pool.connection() as conn:  # a payload with a token, as a domain job may carry
        conn.execute(
            "UPDATE job_runs SET payload = payload || %s::jsonb WHERE job_id = %s",
            (json.dumps({"token": "tok-s3cret", "nested": {"password": "pw-s3cret"}}), sent.job_id),
        )

    text = api.get(f"/jobs/{sent.job_id}", headers=as_org(org)).text

    assert "s3cret" not in text and '"token":"***"' in text


def test_another_org_gets_404_on_every_route(api: TestClient) -> None:
    owner, other = uuid.uuid4(), uuid.uuid4()
    sent = ECHO.send(echo(owner, "mine"))
    admin = {"X-Admin": "ops@other.example"}

    assert api.get(f"/jobs/{sent.job_id}", headers=as_org(other)).status_code == 404
    assert api.post(f"/jobs/{sent.job_id}/cancel", headers=as_org(other)).status_code == 404
    assert api.get(f"/jobs/{sent.job_id}/events", headers=as_org(other)).status_code == 404
    assert (
        api.post(
            f"/jobs/dead-letters/{sent.job_id}/replay", headers=as_org(other, **admin)
        ).status_code
        == 404
    )
    assert api.get("/jobs", headers=as_org(other)).json()["items"] == []
    # ... and the owner's job is untouched by those attempts.
    assert api.get(f"/jobs/{sent.job_id}", headers=as_org(owner)).json()["status"] == "QUEUED"


def test_jobs_are_listed_newest_first_in_keyset_pages_with_filters(api: TestClient) -> None:
    org = uuid.uuid4()
    entity = str(uuid.uuid4())
    ids = [ECHO.send(echo(org, f"m{i}")).job_id for i in range(7)]
    on_entity = ECHO.send({"org_id": str(org), "entity_id": entity, "message": "x"}).job_id
    ECHO.send(echo(uuid.uuid4(), "another org"))

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3, "job_name": "test:echo"}
        if cursor:
            params["cursor"] = cursor
        page = api.get("/jobs", params=params, headers=as_org(org)).json()
        seen += [item["job_id"] for item in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert pages == 3 and sorted(seen) == sorted([*ids, on_entity]) and len(set(seen)) == 8
    by_entity = api.get("/jobs", params={"entity_id": entity}, headers=as_org(org)).json()
    assert [item["job_id"] for item in by_entity["items"]] == [on_entity]
    queued = api.get("/jobs", params={"status": "QUEUED"}, headers=as_org(org)).json()
    assert len(queued["items"]) == 8
    assert api.get("/jobs", params={"status": "NOPE"}, headers=as_org(org)).status_code == 422
    bad = api.get("/jobs", params={"cursor": "not-a-cursor"}, headers=as_org(org))
    assert bad.status_code == 400 and bad.json()["code"] == "BAD_CURSOR"


def test_a_queued_job_is_canceled_and_a_finished_one_is_refused(api: TestClient) -> None:
    org = uuid.uuid4()
    sent = ECHO.send(echo(org, "later"))

    first = api.post(f"/jobs/{sent.job_id}/cancel", headers=as_org(org))
    again = api.post(f"/jobs/{sent.job_id}/cancel", headers=as_org(org))

    assert first.json() == {"job_id": sent.job_id, "status": "CANCELED"}
    assert again.status_code == 409 and again.json()["code"] == "INVALID_STATE"
    run = runs.find(sent.job_id, org_id=org)
    assert run is not None and run.status == "CANCELED"


def test_events_stream_status_and_progress_until_completed(fleet: Any, api: TestClient) -> None:
    org = uuid.uuid4()
    sent = SLEEP.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 0.6})

    events = []
    with api.stream("GET", f"/jobs/{sent.job_id}/events", headers=as_org(org)) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))

    statuses = [event["status"] for event in events]
    assert statuses[-1] == "COMPLETED" and events[-1]["terminal"] is True
    assert "RUNNING" in statuses and all(not e["terminal"] for e in events[:-1])


def _sse(stream: Any) -> list[tuple[int, dict[str, Any]]]:
    """(id, data) of every event of a stream, to its end."""
    found, event_id = [], None
    for line in stream.iter_lines():
        if line.startswith("id: "):
            event_id = int(line.removeprefix("id: "))
        elif line.startswith("data: "):
            found.append((event_id, json.loads(line.removeprefix("data: "))))
    return found


def test_event_ids_grow_across_connections_and_last_event_id_resumes_after_it(
    fleet: Any, api: TestClient
) -> None:
    """Issue 30: ids used to restart at 1 on every connection and `Last-Event-ID` was ignored."""
    org = uuid.uuid4()
    sent = SLEEP.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 1.0})
    wait_run(sent.job_id, "RUNNING", org_id=org, timeout=15)

    with api.stream("GET", f"/jobs/{sent.job_id}/events", headers=as_org(org)) as stream:
        lines = stream.iter_lines()
        first_id = None
        for line in lines:  # the first event only, then the connection drops
            if line.startswith("id: "):
                first_id = int(line.removeprefix("id: "))
                break
    assert first_id is not None  # the run's version (job_runs.version), not a count per connection

    resumed = api.stream(
        "GET",
        f"/jobs/{sent.job_id}/events",
        headers=as_org(org, **{"Last-Event-ID": str(first_id)}),
    )
    with resumed as stream:
        events = _sse(stream)
    ids = [event_id for event_id, _ in events]
    assert ids == sorted(ids) and all(i > first_id for i in ids)
    assert events[-1][1]["status"] == "COMPLETED"

    last = str(ids[-1])  # the terminal event was seen: the browser must stop reconnecting
    done = api.get(f"/jobs/{sent.job_id}/events", headers=as_org(org, **{"Last-Event-ID": last}))
    assert done.status_code == 204
    bad = api.get(f"/jobs/{sent.job_id}/events", headers=as_org(org, **{"Last-Event-ID": "x"}))
    assert bad.status_code == 400 and bad.json()["code"] == "BAD_LAST_EVENT_ID"


def test_dead_jobs_are_listed_and_replayed_by_an_admin_with_an_audit(
    fleet: Any, api: TestClient
) -> None:
    org = uuid.uuid4()
    sent = ECHO.send(echo(org, "permanent"))
    wait_run(sent.job_id, "DEAD", org_id=org, timeout=15)
    ops = as_org(org, **{"X-Admin": "ops@example.com"})

    assert api.get("/jobs/dead-letters", headers=as_org(org)).status_code == 403
    dead = api.get("/jobs/dead-letters", headers=ops).json()
    assert [item["job_id"] for item in dead["items"]] == [sent.job_id]
    assert dead["items"][0]["error_code"] == "TEST_PERMANENT"

    replay = api.post(f"/jobs/dead-letters/{sent.job_id}/replay", headers=ops)

    assert replay.status_code == 200 and replay.json()["replayed_by"] == "ops@example.com"
    run = wait_run(sent.job_id, "DEAD", org_id=org, timeout=15)
    assert (run.replay_count, run.replayed_by) == (1, "ops@example.com")
    # A job that is not dead: once its row exists (a producer's QUEUED row is written after the
    # send returns, run_writer's fast lane), a replay is refused.
    alive = ECHO.send(echo(org, "x"))
    wait_run(alive.job_id, "COMPLETED", org_id=org, timeout=15)
    assert api.post(f"/jobs/dead-letters/{alive.job_id}/replay", headers=ops).status_code == 409


def test_fleet_operators_pause_and_resume_a_queue_through_the_api(
    api: TestClient, runtime: Runtime
) -> None:
    ops = {"X-Operator": "ops@example.com"}
    assert api.post("/jobs/queues/email/pause", json={"reason": "x"}).status_code == 403
    assert api.post("/jobs/queues/email/pause", json={"reason": ""}, headers=ops).status_code == 422

    paused = api.post("/jobs/queues/email/pause", json={"reason": "provider ban"}, headers=ops)

    assert paused.status_code == 200
    assert (paused.json()["paused"], paused.json()["by"]) == (True, "ops@example.com")
    states = {q["queue"]: q for q in api.get("/jobs/queues", headers=ops).json()}
    assert states["email"]["reason"] == "provider ban" and states["doc"]["paused"] is False
    assert api.post("/jobs/queues/nope/pause", json={"reason": "x"}, headers=ops).status_code == 404
    resumed = api.post("/jobs/queues/email/resume", headers=ops)
    assert resumed.json()["paused"] is False
    from shared import pauses

    assert [a["actor"] for a in pauses.history(runtime, target="email")] == ["ops@example.com"] * 2


def test_every_error_a_route_answers_is_in_the_openapi_document(api: TestClient) -> None:
    """Issue 30: `GET /jobs` and `/jobs/dead-letters` answered 400 BAD_CURSOR undeclared.
    Each route is driven to each error it can answer; the status must be in its document."""
    org, admin = uuid.uuid4(), {"X-Admin": "ops@example.com"}
    missing = f"{org}:test:echo:{uuid.uuid4()}:0000000000000000"
    answered = {
        ("/jobs", "get"): api.get("/jobs", params={"cursor": "x"}, headers=as_org(org)),
        ("/jobs/dead-letters", "get"): api.get(
            "/jobs/dead-letters", params={"cursor": "x"}, headers=as_org(org, **admin)
        ),
        ("/jobs/{job_id}", "get"): api.get(f"/jobs/{missing}", headers=as_org(org)),
        ("/jobs/{job_id}/cancel", "post"): api.post(f"/jobs/{missing}/cancel", headers=as_org(org)),
        ("/jobs/{job_id}/events", "get"): api.get(f"/jobs/{missing}/events", headers=as_org(org)),
        ("/jobs/dead-letters/{job_id}/replay", "post"): api.post(
            f"/jobs/dead-letters/{missing}/replay", headers=as_org(org, **admin)
        ),
        ("/jobs/queues/{queue}/pause", "post"): api.post(
            "/jobs/queues/nope/pause", json={"reason": "x"}, headers={"X-Operator": "ops"}
        ),
    }
    document = api.get("/openapi.json").json()["paths"]
    for (path, method), answer in answered.items():
        assert answer.status_code >= 400, (path, answer.status_code)
        declared = document[path][method]["responses"]
        assert str(answer.status_code) in declared, (path, method, answer.status_code, declared)


@pytest.fixture
def slow_producer(settings: Any) -> Iterator[Runtime]:
    """Another process's producer, as an API replica or a script is: its QUEUED rows are
    written `linger` late by a writer this process cannot flush."""
    from shared.db.connect import run_writer

    producer = Runtime(settings)
    producer.writer = run_writer(settings, linger_ms=1_000)
    yield producer
    producer.close()


def test_a_job_another_process_has_just_sent_is_found_before_its_queued_row_is_written(
    api: TestClient, slow_producer: Runtime
) -> None:
    """CI of stop 43: the events of a job sent by another runtime answered 404 (`no job`): its
    QUEUED row was on its way, and an `EventSource` does not reconnect after a 404."""
    org = uuid.uuid4()
    sent = slow_producer.sender.send(
        SLEEP, {"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 0}
    )
    canceled = slow_producer.sender.send(
        SLEEP, {"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 0}
    )

    got = api.get(f"/jobs/{sent.job_id}", headers=as_org(org))
    assert got.status_code == 200, got.text
    assert got.json()["status"] == "QUEUED"
    cancel = api.post(f"/jobs/{canceled.job_id}/cancel", headers=as_org(org))
    assert cancel.json() == {"job_id": canceled.job_id, "status": "CANCELED"}
    with api.stream("GET", f"/jobs/{sent.job_id}/events", headers=as_org(org)) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")


def test_a_job_nobody_sent_is_not_found_at_once(api: TestClient) -> None:
    """The wait above is only for a job Redis has accepted: an unknown id is a 404 at once."""
    import time

    org = uuid.uuid4()
    began = time.monotonic()
    assert api.get(f"/jobs/{org}:test:sleep:x:0", headers=as_org(org)).status_code == 404
    events = api.get(f"/jobs/{org}:test:sleep:x:0/events", headers=as_org(org))
    assert events.status_code == 404
    assert time.monotonic() - began < 1.0
