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

import pytest

from shared.broker import codec
from shared.broker.consumer import fetch
from shared.config import Settings
from shared.jobs import catalog
from tests.support.jobs import ECHO
from tests.support.wait import wait_run

ROOT = Path(__file__).resolve().parents[2]
PRODUCER = ROOT / "tests" / "wire" / "producer.mjs"
DOC = ROOT / "docs" / "wire-protocol.md"
SCRIPT = ROOT / "shared" / "broker" / "lua" / "enqueue_once.lua"


def _node_send(settings: Settings, payload: dict[str, Any], *extra: str) -> dict[str, Any]:
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
        "--payload", json.dumps(payload), *extra,
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_foreign_producer_names_a_lane_with_the_two_optional_arguments(runtime, settings) -> None:
    """docs/wire-protocol.md §3: with a priority and its org, the message waits in that org's
    lane of that priority, and the fetch honours it; without them, in the queue's own list."""
    org = uuid.uuid4()
    ns = settings.broker_namespace
    _node_send(settings, _echo(org, "plain from node"))
    high = _node_send(settings, _echo(org, "high from node"), "--priority", "high")
    client = runtime.broker.client
    assert client.llen(f"{ns}:testq.lane.h/{org}") == 1 and client.llen(f"{ns}:testq") == 1
    ((_, data),) = fetch(runtime.broker, "testq", 1)
    assert codec.decode(data or b"").options["job_id"] == high["job_id"]


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


SCHEMAS = ROOT / "tests" / "contracts" / "schemas"
VECTORS = ROOT / "tests" / "vectors" / "job_ids.json"


def _node_send_job(settings: Settings, job_name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """`producer.mjs` with the exported contracts: any job of the catalog, as another language
    would send it (the payload as given: defaults left for the producer to fill)."""
    url = urlparse(settings.redis_url)
    node = shutil.which("node")
    assert node, "node is needed (the project's npm tooling installs it)"
    argv = [
        node, str(PRODUCER),
        "--redis", f"{url.hostname}:{url.port or 6379}",
        "--namespace", settings.broker_namespace,
        "--window-ms", str(settings.dedup_window_ms),
        "--schemas", str(SCHEMAS), "--job", job_name, "--payload", json.dumps(payload),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _fresh(job_name: str, payload: dict[str, Any], org: uuid.UUID) -> dict[str, Any]:
    """The vector's payload for a new piece of work (a new entity, or a new round)."""
    fresh = {key: value for key, value in payload.items() if key != "v"}  # the latest version
    if "entity_id" in fresh:
        fresh["entity_id"] = str(uuid.uuid4())
        fresh["org_id"] = str(org)
    elif "slot" in fresh:
        fresh["slot"] = f"2026-12-03T{uuid.uuid4().int % 24:02d}:{uuid.uuid4().int % 60:02d}Z"
    else:  # a chain action: a round of its own
        fresh["round_id"] = uuid.uuid4().int % 10**9
        fresh.setdefault("chain_id", 31337)
        fresh.setdefault("contract", "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512")
    return fresh


def _documents(db: Any, payload: dict[str, Any]) -> None:
    """A document's jobs need their document (a Python send checks it: requires.py)."""
    file_id = uuid.uuid4()
    db.execute(
        "INSERT INTO file_objects (id, org_id, provider, bucket, key, content_type, size_bytes, "
        "sha256) VALUES (%s, %s, 'local', 'b', %s, 'application/pdf', 1, 'x')",
        (file_id, payload["org_id"], f"k/{file_id}"),
    )
    db.execute(
        "INSERT INTO documents (id, org_id, file_object_id) VALUES (%s, %s, %s)",
        (payload["entity_id"], payload["org_id"], file_id),
    )


def _catalog_cases() -> list[tuple[str, dict[str, Any]]]:
    cases: dict[str, dict[str, Any]] = {}
    for case in json.loads(VECTORS.read_text("utf-8"))["payloads"]:
        cases.setdefault(case["job_name"], case["payload"])
    return sorted(cases.items())


@pytest.mark.parametrize(("job_name", "payload"), _catalog_cases(), ids=lambda v: str(v)[:24])
def test_every_catalog_job_sent_from_node_and_from_python_deduplicates_both_ways(
    runtime, settings, db, job_name: str, payload: dict[str, Any]
) -> None:
    """Issue 30: the Node producer sent only one job, and export ids differed between the
    languages (Python left `bom: false` out of the hashed form)."""
    spec = catalog.get(job_name)
    org = uuid.uuid4()
    node_first, python_first = _fresh(job_name, payload, org), _fresh(job_name, payload, org)
    if spec.requires is not None:
        _documents(db, node_first)
        _documents(db, python_first)

    theirs = _node_send_job(settings, job_name, node_first)
    assert theirs["duplicate"] is False
    ours = spec.send(node_first)
    assert ours.duplicate and (ours.job_id, ours.message_id) == (
        theirs["job_id"],
        theirs["message_id"],
    )

    mine = spec.send(python_first)
    assert not mine.duplicate
    late = _node_send_job(settings, job_name, python_first)
    assert late["duplicate"] is True and (late["job_id"], late["holder"]) == (
        mine.job_id,
        mine.message_id,
    )


def test_the_node_implementation_of_the_documented_algorithm_matches_every_vector() -> None:
    node = shutil.which("node")
    assert node, "node is needed (the project's npm tooling installs it)"
    done = subprocess.run(
        [node, str(ROOT / "tests" / "wire" / "vectors.mjs"), str(VECTORS), str(SCHEMAS)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    total = len(json.loads(VECTORS.read_text("utf-8"))["payloads"])
    assert done.stdout.rstrip().endswith(" vectors match") and total >= len(catalog.BY_NAME)
