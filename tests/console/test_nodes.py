"""The Nodes page (issue 32): each worker process with its host, pid, service, queues, threads,
start and last heartbeat, what it runs now, and a stale heartbeat explained (which process it
was), from what the workers record at boot (`shared/broker/nodes.py`)."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shared.broker import nodes
from shared.pauses import redis_client
from tests.console.conftest import insert_run
from tests.console.test_security import client


def silent_node(runtime: Any) -> nodes.Node:
    """A worker-email process on box-7 whose last heartbeat was a minute ago (killed, say)."""
    ns = runtime.settings.broker_namespace
    client = redis_client(runtime)
    now_ms = time.time() * 1000
    silent = nodes.Node(id=str(uuid.uuid4()), host="box-7", pid=4242, service="worker-email",
                        queues=["email"], threads=8, started_ms=int(now_ms - 600_000),
                        lease_owner="box-7:4242:abcd1234")  # fmt: skip
    client.hset(nodes.nodes_key(ns), silent.id, json.dumps(silent.__dict__))
    client.zadd(f"{ns}:__heartbeats__", {silent.id: now_ms - 60_000})
    return silent


def test_a_worker_records_which_process_it_is_and_its_runs_show_under_it(
    runtime: Any, fleet: Any, db: Any, tmp_path: Path
) -> None:
    ns = runtime.settings.broker_namespace
    records = nodes.read(redis_client(runtime), ns)
    me = next(n for n in records if n.pid == os.getpid())
    assert (me.host, me.service, me.queues) == (socket.gethostname(), "test", ["testq"])
    assert me.threads > 0 and me.lease_owner.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    long_job = insert_run(db, status="RUNNING", lease_owner=me.lease_owner,
                          started_at=datetime.now(UTC) - timedelta(minutes=3),
                          progress={"done": 2, "total": 9})  # fmt: skip
    with client(runtime, tmp_path) as c:
        page = c.get("/nodes").text
    card = page.split('data-test="node"')[1]
    assert "test · " in card and f"{me.host}:{me.pid}" in card and "testq" in card
    assert 'data-state="alive"' in card and long_job in card and "2 / 9" in card
    assert "3 min ago" in card


def test_a_stale_heartbeat_says_which_process_it_was_and_an_unknown_one_says_so(
    runtime: Any, db: Any, tmp_path: Path
) -> None:
    ns = runtime.settings.broker_namespace
    silent = silent_node(runtime)
    unknown = str(uuid.uuid4())
    redis_client(runtime).zadd(f"{ns}:__heartbeats__", {unknown: time.time() * 1000 - 90_000})
    orphan = insert_run(db, status="RUNNING", lease_owner="gone-host:1:ffff0000",
                        started_at=datetime.now(UTC))  # fmt: skip
    taken = insert_run(db, status="RUNNING", lease_owner=silent.lease_owner,
                       started_at=datetime.now(UTC))  # fmt: skip
    with client(runtime, tmp_path) as c:
        page = c.get("/nodes").text
        overview = c.get("/").text
    stale = next(p for p in page.split('data-test="node"')[1:] if silent.id in p)
    assert 'data-state="stale"' in stale and "worker-email · box-7:4242" in stale
    assert "Was worker-email (pid 4242 on box-7, queues email); silent for 60 s" in stale
    assert taken in stale  # what it was running when it went silent
    other = next(p for p in page.split('data-test="node"')[1:] if unknown in p)
    assert "unknown process" in other and "left no record" in other
    assert orphan in page.split('data-test="orphans"')[1]
    assert "2 stale: which process?" in overview and 'href="/nodes"' in overview


def test_a_clean_stop_is_recorded_and_long_gone_records_are_dropped_at_the_next_boot(
    runtime: Any, settings: Any
) -> None:
    from tests.conftest import FleetWorker
    from tests.support.inprocess import started_workers

    ns = runtime.settings.broker_namespace
    r = redis_client(runtime)
    old = nodes.Node(id="gone-long-ago", host="h", pid=1, service="worker-ai", queues=["ai"],
                     threads=1, started_ms=int(time.time() * 1000) - nodes.FORGET_AFTER_MS - 1,
                     lease_owner="h:1:x")  # fmt: skip
    r.hset(nodes.nodes_key(ns), old.id, json.dumps(old.__dict__))
    with started_workers() as start:
        start(FleetWorker(settings))
        assert old.id not in {n.id for n in nodes.read(r, ns)}  # dropped at this boot
    me = next(n for n in nodes.read(r, ns) if n.pid == os.getpid())
    assert me.stopped_ms is not None and me.stopped_ms >= me.started_ms
