"""No message can stop a queue (issue 13): bytes that are no Dramatiq message are recorded as
DEAD runs and removed, a message without `redis_message_id` is acknowledged like any other, and
a consumer thread that dies for any reason makes `/health/ready` fail and shows in `fleet status`."""

from __future__ import annotations

import json
import pickle
import urllib.error
import urllib.request
import uuid
from typing import Any
from uuid import uuid4

import pytest
from structlog.testing import capture_logs

from shared import dlq
from shared.broker import FleetRedisConsumer
from shared.cli import status
from tests.support.jobs import ECHO, raw_message
from tests.support.procs import free_port
from tests.support.wait import wait_for, wait_run

#: A message Dramatiq's PickleEncoder would write (another producer's encoder).
PICKLED = pickle.dumps(
    {"queue_name": "testq", "actor_name": "test:echo", "args": [{"v": 2}], "kwargs": {}}
)
#: JSON whose args are nested 10,000 deep (the decoder's recursion limit).
DEEP = (
    b'{"queue_name":"testq","actor_name":"test:echo","args":'
    + b"[" * 10_000
    + b"]" * 10_000
    + b',"kwargs":{},"options":{},"message_id":"m","message_timestamp":0}'
)
UNDECODABLE = {
    "not-json": b"\xff\xfe this is not JSON",
    "pickle": PICKLED,
    "empty-object": b"{}",
    "deep": DEEP,
    "deep-but-decodable": DEEP.replace(b"[" * 10_000, b"[" * 500).replace(
        b"]" * 10_000, b"]" * 500
    ),
    "wrong-types": json.dumps(
        {
            "queue_name": "testq",
            "actor_name": ["test:echo"],
            "args": "x",
            "kwargs": {},
            "options": [],
            "message_id": "m",
            "message_timestamp": 0,
        }
    ).encode(),
}


def _push(broker: Any, queue: str, data: bytes) -> str:
    """Put raw bytes on a queue exactly as Dramatiq's own enqueue lays them out."""
    redis_id = str(uuid4())
    ns = broker.namespace
    broker.client.hset(f"{ns}:{queue}.msgs", redis_id, data)
    broker.client.rpush(f"{ns}:{queue}", redis_id)
    return redis_id


def _echo(org: uuid.UUID, text: str) -> dict[str, str]:
    return {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": text}


def _leftovers(broker: Any) -> tuple[int, int]:
    """(messages still stored, messages fetched and never acknowledged) on testq."""
    ns, client = broker.namespace, broker.client
    acks = sum(client.scard(key) for key in client.scan_iter(f"{ns}:__acks__.*.testq"))
    return client.hlen(f"{ns}:testq.msgs"), acks


def test_undecodable_messages_are_dead_runs_and_the_consumer_keeps_consuming(fleet) -> None:
    # Given undecodable messages that one fetch brings in together (the worker is paused)
    fleet.worker.pause()
    ids = {name: _push(fleet.broker, "testq", data) for name, data in UNDECODABLE.items()}
    org = uuid.uuid4()
    after = ECHO.send(_echo(org, "after"))
    fleet.worker.resume()

    # Then each is a DEAD run keyed by its Redis message id, visible in the DLQ
    def dead() -> dict[str, Any]:
        found = {run.job_id: run for run in dlq.list_dead(queue="testq")}
        return found if len(found) == len(ids) else {}

    found = wait_for(dead, timeout=15, what="a DEAD run per undecodable message")
    for name, redis_id in ids.items():
        run = found[f"raw:testq:{redis_id}"]
        assert (run.status, run.error_code) == ("DEAD", "UNDECODABLE"), name
        assert run.payload["redis_message_id"] == redis_id
        assert run.payload["size"] == len(UNDECODABLE[name])
    assert found[f"raw:testq:{ids['not-json']}"].payload["raw_base64"]  # not UTF-8: base64
    assert found[f"raw:testq:{ids['empty-object']}"].payload["raw"] == "{}"
    deep = found[f"raw:testq:{ids['deep']}"].payload
    assert deep["truncated"] and len(deep["raw"]) < len(DEEP)  # kept up to a cap

    # And the consumer went on: the job behind them ran, and later ones run too
    wait_run(after.job_id, "COMPLETED", org_id=org, timeout=15)
    later = ECHO.send(_echo(org, "later"))
    wait_run(later.job_id, "COMPLETED", org_id=org, timeout=15)
    # Acknowledged and removed: nothing comes back after a restart
    wait_for(lambda: _leftovers(fleet.broker) == (0, 0), what="every message acknowledged")


def test_a_queue_entry_without_a_body_is_recorded_dead_and_acknowledged(fleet) -> None:
    """Before: an id pushed to the queue with nothing in `.msgs` stayed in the worker's unacked
    set for the worker's life, with no row and no log line (issue 31)."""
    fleet.worker.pause()
    ns = fleet.broker.namespace
    bodiless = str(uuid4())
    fleet.broker.client.rpush(f"{ns}:testq", bodiless)
    org = uuid.uuid4()
    after = ECHO.send(_echo(org, "after the bodiless entry"))
    with capture_logs() as logs:
        fleet.worker.resume()
        run = wait_run(f"raw:testq:{bodiless}", "DEAD", timeout=15)
    assert run.error_code == "UNDECODABLE"
    assert f"no message body in testq.msgs for id {bodiless}" in (run.error or "")
    wait_run(after.job_id, "COMPLETED", org_id=org, timeout=15)
    wait_for(lambda: _leftovers(fleet.broker) == (0, 0), what="the entry acknowledged")
    said = [e for e in logs if e.get("redis_message_id") == bodiless]
    assert [(e["event"], e["size"]) for e in said] == [("consumer.undecodable", 0)]


def test_a_message_without_redis_message_id_does_not_fail_the_ack_batch(fleet) -> None:
    fleet.worker.pause()
    org = uuid.uuid4()
    bare = raw_message("test:echo", _echo(org, "no redis id") | {"v": 2})
    assert "redis_message_id" not in bare.options
    _push(fleet.broker, "testq", bare.encode())
    sent = [ECHO.send(_echo(org, f"n{i}")) for i in range(5)]
    fleet.worker.resume()

    for s in sent:
        wait_run(s.job_id, "COMPLETED", org_id=org, timeout=15)
    wait_run(f"raw:test:echo:{bare.message_id}", "COMPLETED", timeout=15)
    wait_for(lambda: _leftovers(fleet.broker) == (0, 0), what="every message acknowledged")


def _ready(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


class _Fatal(BaseException):
    """Escapes Dramatiq's `except Exception` in its consumer thread: the thread dies."""


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_consumer_thread_fails_readiness_and_shows_in_fleet_status(
    runtime, settings, monkeypatch
) -> None:
    from tests.conftest import FleetWorker
    from tests.support.inprocess import started_workers

    port = free_port()
    patched = settings.model_copy(update={"health_port": port})
    original = FleetRedisConsumer.__next__

    def dying(self: FleetRedisConsumer) -> Any:
        if self.queue_name == "testq" and getattr(self.broker, "kill_consumer", False):
            raise _Fatal("a bug in the consumer")
        return original(self)

    monkeypatch.setattr(FleetRedisConsumer, "__next__", dying)
    with started_workers() as start:
        worker = start(FleetWorker(patched))
        wait_for(lambda: _ready(port)[0] == 200, what="ready")

        worker.broker.kill_consumer = True
        _, body = wait_for(
            lambda: (r := _ready(port))[0] == 503 and r, timeout=10, what="not ready"
        )
        assert "testq" in body["checks"]["consumers"]

        wait_for(
            lambda: status.heartbeats(patched).get("dead_consumers"),
            timeout=10,
            what="fleet status reports the dead consumer",
        )
        report = status.heartbeats(patched)
        assert any("testq" in queues for queues in report["dead_consumers"].values()), report
