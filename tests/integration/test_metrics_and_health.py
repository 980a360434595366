"""Metrics are correct across worker processes; /health/ready tells whether Redis and Postgres
answer; /metrics wants the bearer token when one is set."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.config import Settings
from shared.observability import probes
from shared.observability.health import HealthServer
from tests.support.jobs import SLEEP
from tests.support.procs import Procs, free_port
from tests.support.wait import wait_for, wait_run

TOKEN = "metrics-test-token"
JOBS = 24


def _get(port: int, path: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _completed(port: int) -> float:
    status, body = _get(port, "/metrics", TOKEN)
    assert status == 200
    return sum(
        sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
        if sample.name == "jobfleet_jobs_total"
        and sample.labels == {"job": "test:sleep", "queue": "testq", "status": "COMPLETED"}
    )


@pytest.mark.slow
def test_two_worker_processes_share_metrics_and_serve_health(
    runtime, procs: Procs, tmp_path: Path
) -> None:
    prom = tmp_path / "prometheus"
    prom.mkdir()
    ports = [free_port(), free_port()]
    workers = [
        procs.worker(
            threads=2,
            name=f"w{i}",
            env={
                "PROMETHEUS_MULTIPROC_DIR": str(prom),
                "HEALTH_PORT": str(port),
                "METRICS_TOKEN": TOKEN,
            },
        )
        for i, port in enumerate(ports)
    ]
    org = uuid.uuid4()
    sent = [
        SLEEP.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "seconds": 0.1})
        for _ in range(JOBS)
    ]
    for s in sent:
        wait_run(s.job_id, "COMPLETED", org_id=org, timeout=20)

    per_worker = [
        sum(e.get("status") == "COMPLETED" for e in w.events("run.finished")) for w in workers
    ]
    assert sum(per_worker) == JOBS and min(per_worker) > 0, per_worker  # both did some
    for port in ports:
        wait_for(lambda port=port: _completed(port) == JOBS, what=f"{JOBS} COMPLETED on :{port}")
        assert _get(port, "/metrics")[0] == 401  # the token is required
        status, body = _get(port, "/health/ready")
        assert status == 200 and json.loads(body)["checks"] == {
            "redis": "ok",
            "postgres": "ok",
            "consumers": "ok",
        }
        assert _get(port, "/health/live")[0] == 200


def _ready(checks: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    server = HealthServer(host="127.0.0.1", port=0, service="probe-test", checks=checks).start()
    try:
        status, body = _get(server.port, "/health/ready")
        return status, json.loads(body)
    finally:
        server.stop()


def test_readiness_is_503_when_postgres_does_not_answer(runtime, settings: Settings) -> None:
    redis_ok = probes.redis_check(runtime.broker.client)
    status, body = _ready(
        {"redis": redis_ok, "postgres": probes.postgres_check(settings.database_dsn)}
    )
    assert status == 200 and body["status"] == "ready"

    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/jobfleet"
    status, body = _ready({"redis": redis_ok, "postgres": probes.postgres_check(dead)})
    assert status == 503 and body["status"] == "not ready"
    assert body["checks"]["redis"] == "ok" and body["checks"]["postgres"].startswith("error")
