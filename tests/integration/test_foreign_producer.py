"""The wire protocol (docs/wire-protocol.md) is enough to write a producer: one in Node.js with
builtins only (`tests/wire/producer.mjs`, none of our code) and ours deduplicate both ways, and
each job runs once."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from shared.config import Settings
from tests.support.jobs import ECHO
from tests.support.wait import wait_run

ROOT = Path(__file__).resolve().parents[2]
PRODUCER = ROOT / "tests" / "wire" / "producer.mjs"
DOC = ROOT / "docs" / "wire-protocol.md"
SCRIPT = ROOT / "shared" / "broker" / "lua" / "enqueue_once.lua"


def _node_send(settings: Settings, payload: dict[str, Any]) -> dict[str, Any]:
    url = urlparse(settings.redis_url)
    assert url.path in ("", "/", "/0"), "the Node producer talks to database 0"
    node = shutil.which("node")
    assert node, "node is needed (the project's npm tooling installs it)"
    argv = [
        node, str(PRODUCER),
        "--redis", f"{url.hostname}:{url.port or 6379}",
        "--namespace", settings.broker_namespace,
        "--window-ms", str(settings.dedup_window_ms),
        "--queue", "testq", "--job", "test:echo", "--entity-type", "echo",
        "--payload", json.dumps(payload),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _echo(org: uuid.UUID, text: str) -> dict[str, Any]:
    # The wire form of a v2 payload: every field, defaults included (the id hashes them).
    return {"v": 2, "org_id": str(org), "entity_id": str(uuid.uuid4()), "message": text, "times": 1}


def test_a_foreign_producer_and_ours_deduplicate_both_ways_and_each_job_runs_once(
    fleet, settings, marks
) -> None:
    org = uuid.uuid4()
    first, second = _echo(org, "node first"), _echo(org, "python first")

    # Node sends first, then we send the same job: a duplicate of Node's message
    theirs = _node_send(settings, first)
    assert theirs["duplicate"] is False
    ours = ECHO.send(first)
    assert ours.duplicate and (ours.job_id, ours.message_id) == (
        theirs["job_id"],
        theirs["message_id"],
    )

    # We send first, then Node sends the same job: Node is told it is a duplicate of ours
    mine = ECHO.send(second)
    assert not mine.duplicate
    late = _node_send(settings, second)
    assert late["duplicate"] is True
    assert (late["job_id"], late["holder"]) == (mine.job_id, mine.message_id)

    # And the worker accepts Node's message (its job id is its payload's) and runs each once
    done = wait_run(theirs["job_id"], "COMPLETED", org_id=org, timeout=15)
    assert done.result == {"echo": "node first", "attempt": 1}
    wait_run(mine.job_id, "COMPLETED", org_id=org, timeout=15)
    executions = sorted(marks.read_text().splitlines())
    assert executions == sorted([f"echo {theirs['job_id']} 1", f"echo {mine.job_id} 1"])


def test_the_documented_script_is_the_one_the_fleet_and_the_foreign_producer_run() -> None:
    script = SCRIPT.read_text()
    documented = re.search(r"```lua\n(.*?)```", DOC.read_text(), re.S)
    assert documented is not None, "docs/wire-protocol.md shows the script in a lua block"
    assert documented.group(1) == script
    embedded = re.search(r"const ENQUEUE_ONCE = `(.*?)`;", PRODUCER.read_text(), re.S)
    assert embedded is not None and embedded.group(1) == script
