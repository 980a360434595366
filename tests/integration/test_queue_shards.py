"""Queues sharded over two Redis primaries (REDIS_QUEUE_URLS, shared/queue_servers.py; issue 35).

Two real redis-servers: the session's (REDIS_URL, "home") carries `testq` and every catalog queue
but `email`; a private one started here ("B") carries `testq-b` and `email`. One producer sends to
both (the send path and the outbox relay); each message lands on its queue's server and nowhere
else; a worker process per server drains its own queue (its broker talks to that server only),
each job once; a pause of `testq-b` is kept on B and its worker honours it; the scheduler's
backlog for KEDA, `fleet status` and the console's queues page read each queue on its server and
name the server. A worker whose queues are on two servers refuses to start.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from apscheduler.schedulers.background import BackgroundScheduler

from scheduler.process import health_server
from shared import outbox, pauses
from shared.broker import build_broker
from shared.cli import status
from shared.config import Settings
from shared.console import fleet
from shared.jobs import catalog
from shared.launcher import plan
from shared.queue_servers import QueuesOnSeveralServers, label, server_of
from shared.runtime import Runtime, set_runtime
from tests.console.test_security import client as console
from tests.integration.test_k8s_scaling import TOKEN, get
from tests.support.jobs import ECHO, ECHO_B
from tests.support.procs import Procs, RedisServer, free_port
from tests.support.queues import queued
from tests.support.wait import wait_for

N = 20
FLEET = str(Path(sys.executable).with_name("fleet"))


def sharded(settings: Settings, b: RedisServer) -> Settings:
    return settings.model_copy(update={"redis_queue_urls": {"testq-b": b.url, "email": b.url}})


def env_of(shards: Settings) -> dict[str, str]:
    return {"REDIS_QUEUE_URLS": json.dumps(shards.redis_queue_urls)}


def echo(message: str) -> dict[str, Any]:
    return {"org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()), "message": message}


def email() -> dict[str, Any]:
    return {
        "org_id": str(uuid.uuid4()),
        "entity_id": str(uuid.uuid4()),
        "template_key": "welcome",
        "recipient_email": "ada@example.com",
    }


def lengths(client: redis.Redis, ns: str, *queues: str) -> dict[str, int]:
    return {q: queued(client, ns, q) for q in queues}


@pytest.fixture
def b(procs: Procs) -> RedisServer:
    return procs.redis(name="redis-b")


@pytest.fixture
def shards(runtime: Runtime, settings: Settings, b: RedisServer) -> Any:
    """The test's runtime with `testq-b` and `email` on B (installed for the sends)."""
    shard_settings = sharded(settings, b)
    shard_runtime = Runtime(shard_settings)
    previous = set_runtime(shard_runtime)
    try:
        yield shard_runtime
    finally:
        set_runtime(previous)
        shard_runtime.close()


def test_two_redis_primaries_carry_their_own_queues_end_to_end(
    shards: Runtime, settings: Settings, b: RedisServer, procs: Procs, tmp_path: Path
) -> None:
    ns = settings.broker_namespace
    home = redis.Redis.from_url(settings.redis_url)
    other = redis.Redis.from_url(b.url)
    try:
        # One producer, both servers: the send path ...
        home_ids = [ECHO.send(echo(f"home {i}")).job_id for i in range(N)]
        b_ids = [ECHO_B.send(echo(f"b {i}")).job_id for i in range(N)]
        # ... and the outbox relay (email is on B).
        with shards.sessions() as session, session.begin():
            outbox.enqueue(session, catalog.EMAIL_SEND, email())
        assert outbox.relay_once(shards, now=_now()).published == 1
        catalog.EMAIL_SEND.send(email())
        assert shards.settle(5)

        assert lengths(home, ns, "testq", "testq-b", "email") == {
            "testq": N,
            "testq-b": 0,
            "email": 0,
        }
        assert lengths(other, ns, "testq", "testq-b", "email") == {
            "testq": 0,
            "testq-b": N,
            "email": 2,
        }
        # The dedup key is claimed on the queue's server: a repeat send there is a duplicate.
        again = ECHO_B.send(_payload_of(shards, b_ids[0]))
        assert again.duplicate and again.job_id == b_ids[0]
        assert other.exists(f"{ns}:jobfleet:job-id:{b_ids[0]}")
        assert not home.exists(f"{ns}:jobfleet:job-id:{b_ids[0]}")

        # The scheduler's backlog (what KEDA reads), `fleet status` and the console: each queue
        # read on its server, the server named.
        served = shards.settings.model_copy(
            update={"health_port": free_port(), "health_host": "127.0.0.1", "metrics_token": TOKEN}
        )
        scheduler_health = health_server(served, BackgroundScheduler())
        assert scheduler_health is not None
        scheduler_health.start()

        def backlog(queue: str) -> dict[str, Any]:
            code, body = get(scheduler_health, f"/queues/{queue}/backlog")
            assert code == 200, body
            return body

        assert backlog("email") == {"queue": "email", "ready": 2, "paused": False, "backlog": 2}
        assert backlog("ai")["backlog"] == 0
        report = status.collect(shards.settings, tmp_path / "fleet.json")
        assert report["queues"]["email"]["ready"] == 2
        assert report["queues"]["email"]["server"] == label(server_of(shards.settings, "email"))
        assert report["queues"]["ai"]["server"] == label(server_of(shards.settings, None))
        assert report["queues"]["email"]["server"] != report["queues"]["ai"]["server"]
        page = {q["queue"]: q for q in fleet.queues(shards)}
        assert page["email"]["ready"] == 2 and page["email"]["server"].endswith(f":{b.port}/0")
        assert page["ai"]["ready"] == 0 and page["ai"]["server"] != page["email"]["server"]
        with console(shards, tmp_path, token="t", token_operator="ops") as web:
            html = web.get("/", headers={"Authorization": "Bearer t"}).text
        served = re.findall(r'data-test="queue-server">([^<]*)<', html)
        assert page["email"]["server"] in served and page["ai"]["server"] in served
        cli = subprocess.run(
            [FLEET, "status", "--json"],
            env={**procs.env(env_of(shards.settings)), "FLEET_LOG_LEVEL": "ERROR"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        queues = json.loads(cli.stdout)["queues"]
        assert queues["email"]["ready"] == 2 and queues["email"]["server"].endswith(f":{b.port}/0")

        # A pause of testq-b is kept on B (where its workers read it) and shown from there.
        pauses.pause(shards, "testq-b", by="ops", reason="shard test", known=("testq", "testq-b"))
        assert other.hexists(f"{ns}:jobfleet:paused-queues", "testq-b")
        assert not home.hexists(f"{ns}:jobfleet:paused-queues", "testq-b")
        assert "testq-b" in pauses.paused_everywhere(shards.queue_servers, ns)
        assert _depth(shards, "testq-b") == {"ready": N, "paused": True, "backlog": 0}
        pauses.pause(shards, "email", by="ops", reason="shard test")
        assert backlog("email") == {"queue": "email", "ready": 2, "paused": True, "backlog": 0}
        scheduler_health.stop()

        # A worker process per server drains its own queue.
        env = env_of(shards.settings)
        procs.worker(env=env, name="home-worker")
        b_worker = procs.worker(env={**env, "JOBFLEET_TEST_QUEUE": "testq-b"}, name="b-worker")
        _wait_done(shards, home_ids)
        time.sleep(1.0)  # testq-b is paused: its worker takes nothing
        assert lengths(other, ns, "testq-b") == {"testq-b": N}
        assert b_worker.alive()
        pauses.resume(shards, "testq-b", by="ops", known=("testq", "testq-b"))
        _wait_done(shards, b_ids)

        lines = procs.mark_lines()
        assert sorted(line.split()[1] for line in lines if line.startswith("echo ")) == sorted(
            home_ids
        )
        assert sorted(line.split()[1] for line in lines if line.startswith("echo-b ")) == sorted(
            b_ids
        )  # each job once, on its own server's worker
        wait_for(
            lambda: (
                lengths(home, ns, "testq") == {"testq": 0}
                and lengths(other, ns, "testq-b") == {"testq-b": 0}
            ),
            what="both queues drained",
        )
        # Each worker beats on its queues' server; `fleet status` counts both.
        assert status.heartbeats(shards.settings)["alive"] >= 2
        assert other.zcard(f"{ns}:__heartbeats__") >= 1
    finally:
        home.close()
        other.close()


def test_a_worker_whose_queues_are_on_two_servers_refuses_to_start(
    settings: Settings, b: RedisServer
) -> None:
    with pytest.raises(QueuesOnSeveralServers, match="testq-b") as raised:
        build_broker(sharded(settings, b), queues=["testq", "testq-b"])
    assert f":{b.port}" in str(raised.value)
    broker = build_broker(sharded(settings, b), queues=["testq-b"])
    try:
        with pytest.raises(QueuesOnSeveralServers):
            broker.declare_queue("testq")  # an actor of a queue its server does not carry
    finally:
        broker.client.close()


def test_sentinels_need_a_master_for_each_sharded_queue(settings: Settings) -> None:
    with pytest.raises(ValueError, match="REDIS_QUEUE_SENTINEL_MASTERS"):
        Settings(
            _env_file=None,  # type: ignore[call-arg]
            redis_sentinels="127.0.0.1:26379",
            redis_queue_urls={"email": "redis://127.0.0.1:6380/0"},
        )
    ok = Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_sentinels="127.0.0.1:26379",
        redis_queue_urls={"email": "redis://:pw@127.0.0.1:6380/0"},
        redis_queue_sentinel_masters={"email": "shard-email"},
    )
    assert server_of(ok, "email") == ("redis://:pw@127.0.0.1:6380/0", "shard-email")
    assert server_of(ok, "ai") == (ok.redis_url, ok.redis_sentinel_master)
    assert label(server_of(ok, "email")) == "sentinel master shard-email"


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def _payload_of(runtime: Runtime, job_id: str) -> dict[str, Any]:
    with runtime.pool.connection() as conn:
        row = conn.execute("SELECT org_id, payload FROM job_runs WHERE job_id = %s", (job_id,))
        org_id, payload = row.fetchone()  # type: ignore[misc]
    return {**payload, "org_id": str(org_id)}


def _depth(runtime: Runtime, queue: str) -> dict[str, Any]:
    from shared.observability import probes

    found = probes.queue_backlog(
        runtime.queue_servers.client(queue), runtime.settings.broker_namespace, queue
    )
    return {k: v for k, v in found.items() if k != "queue"}


def _wait_done(runtime: Runtime, job_ids: list[str]) -> None:
    def done() -> bool:
        with runtime.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM job_runs WHERE job_id = ANY(%s) AND status = 'COMPLETED'",
                (job_ids,),
            ).fetchone()
        return row is not None and row[0] == len(job_ids)

    wait_for(done, timeout=60, what=f"{len(job_ids)} runs COMPLETED")


def test_a_replayed_dead_job_goes_back_to_its_queues_server(
    shards: Runtime, settings: Settings, b: RedisServer, db: Any
) -> None:
    from shared import dlq
    from tests.console.conftest import insert_run

    org = uuid.uuid4()
    model = ECHO_B.build(echo("dead on b") | {"org_id": str(org)})
    job_id = insert_run(
        db,
        org_id=org,
        job_id=ECHO_B.job_id(model),
        job_name="test:echo-b",
        queue="testq-b",
        payload=model.wire(),
        status="DEAD",
    )
    dlq.replay(job_id, org_id=org, by="ops", runtime=shards)
    ns = settings.broker_namespace
    other = redis.Redis.from_url(b.url)
    home = redis.Redis.from_url(settings.redis_url)
    try:
        assert lengths(other, ns, "testq-b") == {"testq-b": 1}
        assert lengths(home, ns, "testq-b") == {"testq-b": 0}
    finally:
        other.close()
        home.close()


@pytest.mark.parametrize("process", [p.name for p in plan.workers()])
def test_each_domain_worker_boots_on_the_server_of_its_queues(
    process: str, settings: Settings, b: RedisServer
) -> None:
    """`dramatiq workers.<domain>.app` calls `boot_worker("<domain>")`: the queues it finds for
    that name are its jobs' queues, so a sharded queue's worker talks to the queue's server."""
    from shared.bootstrap import domain_queues

    domain = process.removeprefix("worker-")
    queues = domain_queues(domain)
    assert queues, f"no queue known for {domain!r}: its worker would boot on REDIS_URL's server"
    moved = settings.model_copy(update={"redis_queue_urls": dict.fromkeys(queues, b.url)})
    broker = build_broker(moved, queues=queues)
    try:
        assert broker.server == (b.url, None)
        broker.declare_queue(queues[0])
        with pytest.raises(QueuesOnSeveralServers):
            broker.declare_queue("testq")  # on REDIS_URL's server
    finally:
        broker.client.close()
