"""compose/k8s/: each worker's KEDA ScaledObject reads its queue's backlog from the scheduler
(`/queues/<queue>/backlog` on its health port, behind the metrics token): the ready messages a
real send puts under this fleet's BROKER_NAMESPACE, and 0 while the queue is paused (its list
keeps growing, but KEDA must not scale a paused worker to its maximum). The manifests themselves:
tests/unit/test_k8s.py and tests/unit/test_k8s_policy.py."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from scheduler.process import health_server
from shared import pauses
from shared.config import Settings
from shared.jobs import catalog
from shared.observability.health import HealthServer
from shared.runtime import Runtime
from tests.support.procs import free_port
from tests.unit.test_k8s import by_kind

TOKEN = "scaler-token"


@pytest.fixture
def scheduler_health(settings: Settings) -> Iterator[HealthServer]:
    served = settings.model_copy(
        update={"health_port": free_port(), "health_host": "127.0.0.1", "metrics_token": TOKEN}
    )
    server = health_server(served, BackgroundScheduler())
    assert server is not None
    server.start()
    try:
        yield server
    finally:
        server.stop()


def get(server: HealthServer, path: str, token: str | None = TOKEN) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def send_email() -> None:
    catalog.EMAIL_SEND.send(
        {
            "org_id": str(uuid.uuid4()),
            "entity_id": str(uuid.uuid4()),
            "template_key": "welcome",
            "recipient_email": "ana@example.com",
            "variables": {"NAME": "Ana"},
        }
    )


def test_the_scaler_reads_the_backlog_a_real_send_grows_and_zero_while_paused(
    runtime: Runtime, settings: Settings, scheduler_health: HealthServer
) -> None:
    trigger = by_kind("ScaledObject")["worker-email"]["spec"]["triggers"][0]
    path = urlsplit(trigger["metadata"]["url"]).path
    location = trigger["metadata"]["valueLocation"]
    assert settings.broker_namespace != "dramatiq"  # the test's own namespace is honoured

    status, before = get(scheduler_health, path)
    assert status == 200
    send_email()
    send_email()
    status, after = get(scheduler_health, path)
    assert after[location] == before[location] + 2 == after["ready"]

    pauses.pause(runtime, "email", by="ops", reason="provider incident")
    try:
        send_email()
        _, paused = get(scheduler_health, path)
        assert paused[location] == 0 and paused["paused"] is True
        assert paused["ready"] == after["ready"] + 1  # the list keeps growing
    finally:
        pauses.resume(runtime, "email", by="ops")
    _, resumed = get(scheduler_health, path)
    assert resumed[location] == after["ready"] + 1


def test_the_backlog_needs_the_metrics_token_and_a_known_queue(
    runtime: Runtime, scheduler_health: HealthServer
) -> None:
    assert get(scheduler_health, "/queues/email/backlog", token=None)[0] == 401
    assert get(scheduler_health, "/queues/email/backlog", token="wrong")[0] == 401
    status, body = get(scheduler_health, "/queues/nope/backlog")
    assert status == 404 and "nope" in body["error"]
