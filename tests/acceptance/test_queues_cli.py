"""`fleet queues pause|resume|status`: the operator's pause, audited, shown by `fleet status`
and by the processes' `/metrics`."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from shared.bootstrap import health_server
from shared.config import Settings
from tests.acceptance.test_cli import as_json, fails, fleet, ok
from tests.support.procs import free_port

pytestmark = pytest.mark.slow


def test_an_operator_pauses_and_resumes_a_queue_and_every_view_shows_it(
    runtime: Any, settings: Settings
) -> None:
    said = ok(
        "queues", "pause", "email", "--reason", "SMTP provider ban", "--by", "ops@example.com"
    )
    assert "paused email" in said.stdout + said.stderr
    # Its own message only: no log line of the pause before it (issue 32).
    assert "queue.paused" not in said.stdout + said.stderr

    status = as_json("queues", "status")
    email = next(q for q in status["queues"] if q["queue"] == "email")
    assert (email["state"], email["by"], email["reason"]) == (
        "PAUSED",
        "ops@example.com",
        "SMTP provider ban",
    )
    assert next(q for q in status["queues"] if q["queue"] == "doc")["state"] == "running"
    # (`fleet status` exits 1 here: no scheduler runs in this session; its report is complete.)
    fleet_status = json.loads(fleet("status", "--json").stdout)
    assert fleet_status["queues"]["email"]["paused"]["reason"] == "SMTP provider ban"
    assert fleet_status["queues"]["doc"]["paused"] is None
    metrics = scrape(settings, runtime)
    assert 'jobfleet_queue_paused{queue="email"} 1.0' in metrics
    assert 'jobfleet_queue_paused{queue="doc"} 0.0' in metrics

    again = ok("queues", "pause", "email", "--reason", "second", "--by", "bob")
    assert "already paused by ops@example.com" in again.stdout + again.stderr

    ok(
        "queues",
        "resume",
        "email",
        "--reason",
        "provider lifted the ban",
        "--by",
        "ops@example.com",
    )
    audit = as_json("queues", "status")["audit"]
    assert [(a["action"], a["target"], a["actor"], a["reason"]) for a in audit] == [
        ("resume", "email", "ops@example.com", "provider lifted the ban"),
        ("pause", "email", "ops@example.com", "SMTP provider ban"),
    ]
    assert 'jobfleet_queue_paused{queue="email"} 0.0' in scrape(settings, runtime)


def test_pausing_an_unknown_queue_is_one_clear_error(runtime: Any) -> None:
    line = fails(1, "queues", "pause", "emails", "--reason", "typo")
    assert "unknown queue 'emails'" in line and "email" in line


def scrape(settings: Settings, runtime: Any) -> str:
    """`/metrics` of a worker process's health server (the one bootstrap builds)."""
    server = health_server(
        settings.model_copy(update={"health_port": free_port(), "health_host": "127.0.0.1"}),
        "test",
        runtime.broker.client,
        ["email", "doc"],
    )
    assert server is not None
    server.start()
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{server.port}/metrics", timeout=10
        ) as answer:
            return str(answer.read().decode())
    finally:
        server.stop()


def test_an_operator_limits_a_queue_fleet_wide_audited_and_every_view_shows_it(
    runtime: Any,
) -> None:
    said = ok("queues", "limit", "export", "4", "--reason", "db load", "--by", "ops@example.com")
    assert "export, the queue: at most 4 running (was no limit)" in said.stdout + said.stderr
    org = "6f1c2a3e-8d4b-4c6f-9a1e-2b3c4d5e6f70"
    ok("queues", "limit", "export", "1", "--org", org, "--by", "ops@example.com")
    status = as_json("queues", "status")
    export = next(q for q in status["queues"] if q["queue"] == "export")
    assert (export["limits"]["limit"], export["limits"]["orgs"]) == (4, {org: 1})
    fleet_status = json.loads(fleet("status", "--json").stdout)
    assert fleet_status["queues"]["export"]["limit"] == 4
    assert "queue 4" in fleet("queues", "status").stdout

    lifted = as_json("queues", "limit", "export", "none", "--by", "ops@example.com")
    assert (lifted["before"], lifted["limit"]) == (4, None)
    audit = as_json("queues", "status")["audit"]
    assert [(a["action"], a["target"], a["reason"]) for a in audit] == [
        ("limit", "export", "queue: 4 -> none"),
        ("limit", "export", f"org {org}: none -> 1"),
        ("limit", "export", "queue: none -> 4; db load"),
    ]
    # Bad input: one clear line, nothing changed.
    assert "at least 1" in fails(2, "queues", "limit", "export", "0")
    assert "whole number" in fails(2, "queues", "limit", "export", "many")
    assert "unknown queue 'exports'" in fails(1, "queues", "limit", "exports", "3")
