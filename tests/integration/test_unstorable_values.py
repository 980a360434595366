"""Values Postgres cannot store (a NUL character, a lone surrogate) never poison the run store.

Before: one payload whose string held a NUL passed the contract, Postgres refused its QUEUED
row (`jsonb` has no `\\u0000`), the run writer retried the whole batch forever and every later
send of the process raised `TrackingUnavailable`. Now the producer refuses such a value at
`send`, naming the field, and a row that Postgres refuses for what it holds is set apart and
reported; it never blocks the other rows nor turns the writer unhealthy.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from shared.config import Settings
from shared.db.connect import run_writer
from shared.errors import PayloadError
from shared.jobs.message import MessageInfo
from shared.jobs.run_writer import Finish, RowRefused
from shared.runtime import Runtime
from tests.support.jobs import ECHO, message_info, raw_message
from tests.support.queues import queued
from tests.support.wait import wait_for, wait_run


def _keys(runtime: Runtime) -> list[bytes]:
    return list(runtime.broker.client.scan_iter(f"{runtime.settings.broker_namespace}:*"))


@pytest.mark.parametrize(
    ("text", "what"), [("a\x00b", "NUL"), ("a\ud800b", "surrogate")], ids=["nul", "surrogate"]
)
def test_a_value_postgres_cannot_store_is_refused_at_send_naming_the_field(
    runtime: Runtime, text: str, what: str
) -> None:
    org = str(uuid.uuid4())
    with pytest.raises(PayloadError) as refused:
        ECHO.send({"org_id": org, "entity_id": str(uuid.uuid4()), "message": text})
    assert refused.value.errors[0]["loc"] == ("message",)
    assert what in str(refused.value) and "message" in str(refused.value)
    assert _keys(runtime) == []  # nothing enqueued

    # The process goes on sending (before: 12 of 12 later sends raised TrackingUnavailable).
    for n in range(3):
        sent = ECHO.send({"org_id": org, "entity_id": str(uuid.uuid4()), "message": f"ok {n}"})
        assert not sent.duplicate
    assert runtime.settle(5)


@pytest.mark.parametrize("key", ["N\udc80", "k\x00"], ids=["surrogate", "nul"])
def test_a_dict_key_postgres_cannot_store_is_refused_at_send_and_at_parse(key: str) -> None:
    """Before: `{"N\\udc80": "Ada"}` passed the send check and was stored as `N\ufffd\ufffd\ufffd`
    (validation altered the key before the wire was checked)."""
    from shared.errors import InvalidPayload
    from workers.email.contracts import EMAIL_SEND

    payload = {
        "v": 1, "org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()),
        "template_key": "welcome", "recipient_email": "ada@example.com",
        "variables": {key: "Ada", "ok": "fine"},
    }  # fmt: skip
    with pytest.raises(PayloadError) as refused:
        EMAIL_SEND.build_wire(payload)
    shown = key.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")
    assert refused.value.errors[0]["loc"] == ("variables", shown)
    message = str(refused.value)
    message.encode("utf-8")  # printable: no lone surrogate in the error itself
    assert "variables" in message and "Postgres cannot store" in message
    with pytest.raises(InvalidPayload, match="variables"):
        EMAIL_SEND.parse(payload)


def test_a_nul_inside_a_nested_value_is_named_by_its_path(runtime: Runtime) -> None:
    from shared.contracts.base import unstorable

    assert unstorable({"a": [{"b": "x\x00"}], "ok": "fine"}) == [("a", 0, "b")]
    assert unstorable({"k\x00": 1}) == [("k\x00",)]
    assert unstorable({"a": ["\ud800"], "b": {1: "x\x00"}}) == [("a", 0), ("b", 1)]
    # What looks like a NUL once written as JSON (the six characters), and what is not JSON:
    # the quick test sends both to the close look, which finds them storable.
    assert unstorable({"t": "\\u0000", "n": 2**70, "f": float("nan"), "o": object()}) == []
    assert unstorable({"plain": ["text", 1, 2.5, None, True, {"é": "ü"}]}) == []


def _queued(job_id: str, payload: Any) -> dict[str, Any]:
    return {
        "o": str(uuid.uuid4()), "n": "test:echo", "j": job_id, "q": "testq", "et": "echo",
        "e": None, "p": payload, "r": None, "m": uuid.uuid4().hex, "t": 1.0e9,
    }  # fmt: skip


def test_a_refused_row_is_set_apart_and_the_others_of_its_batch_are_written(
    runtime: Runtime, settings: Settings, db: psycopg.Connection[Any]
) -> None:
    writer = run_writer(settings)
    try:
        good = [f"good:{uuid.uuid4().hex}" for _ in range(5)]
        bad = f"bad:{uuid.uuid4().hex}"
        writer.record_queued(_queued(good[0], {"n": 0}))
        writer.record_queued(_queued(bad, {"text": "a\x00b"}))
        for job_id in good[1:]:
            writer.record_queued(_queued(job_id, {"n": 1}))
        assert writer.flush(5), "the batch holding the refused row never got written"
        assert writer.healthy and writer.last_error is None
        written = {r[0] for r in db.execute("SELECT job_id FROM job_runs").fetchall()}
        assert written == set(good)
        assert [r.job_id for r in writer.refused] == [bad]
        assert "Unicode" in writer.refused[0].error  # Postgres: unsupported Unicode escape

        # A start whose payload cannot be stored is recorded with a marker in its place (the
        # handler refuses the message itself); a finish whose error text holds a NUL is kept
        # with the character replaced. Neither is retried forever nor raises.
        job_id = f"start:{uuid.uuid4().hex}"
        started = writer.start_run(message_info(job_id, {"text": "a\x00b"}), 3, timeout=5)
        assert started is not None
        writer.finish_run(Finish(job_id, "DEAD", error_code="X", error="bad \x00 text"), 5)
        payload, error = db.execute(
            "SELECT payload, error FROM job_runs WHERE job_id = %s", (job_id,)
        ).fetchone()  # type: ignore[misc]
        assert "unstorable" in payload and "\x00" not in str(payload)
        assert error == "bad \ufffd text"
        assert writer.healthy
    finally:
        writer.close()


def test_a_row_refused_even_without_its_values_fails_its_waiter_once(
    runtime: Runtime, settings: Settings
) -> None:
    writer = run_writer(settings)
    try:
        info = message_info(f"x:{uuid.uuid4().hex}", {"n": 1})
        # An org id that is no UUID: no marker can make this row storable.
        bad = MessageInfo(**{**info.__dict__, "org_id": "not-a-uuid"})  # type: ignore[arg-type]
        with pytest.raises(RowRefused):
            writer.start_run(bad, 3, timeout=5)
        assert writer.healthy
        assert writer.start_run(message_info(f"y:{uuid.uuid4().hex}", {"n": 2}), 3, timeout=5)
    finally:
        writer.close()


def test_a_worker_given_an_unstorable_message_records_it_dead_and_goes_on(fleet) -> None:
    org = uuid.uuid4()
    message = raw_message(
        "test:echo",
        {"v": 2, "org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "a\x00b"},
    )
    fleet.broker.enqueue(message)
    run = wait_run(f"raw:test:echo:{message.message_id}", "DEAD")
    assert run.error_code == "INVALID_PAYLOAD"
    assert "message" in (run.error or "") and "NUL" in (run.error or "")

    sent = fleet.jobs["echo"].send(
        {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "after"}
    )
    assert wait_run(sent.job_id, "COMPLETED", org_id=org).result["echo"] == "after"
    wait_for(lambda: fleet.runtime.writer.healthy, what="the producer's writer healthy")


def test_a_message_whose_run_row_is_refused_is_dead_lettered_not_retried_forever(fleet) -> None:
    """An attempt number past Postgres's `int`: no marker makes this row storable. The message
    goes to Redis's dead-letter set once (before: handed back every 3 s, forever)."""
    org = uuid.uuid4()
    message = raw_message(
        "test:echo",
        {"v": 2, "org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "x"},
    ).copy(options={"attempt": 10**12})
    fleet.broker.enqueue(message)
    ns = fleet.settings.broker_namespace
    client = fleet.broker.client
    wait_for(lambda: client.zcard(f"{ns}:testq.XQ") == 1, what="the message dead-lettered")
    assert client.llen(f"{ns}:testq.DQ") == 0 and queued(client, ns, "testq") == 0

    sent = fleet.jobs["echo"].send(
        {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "after"}
    )
    assert wait_run(sent.job_id, "COMPLETED", org_id=org).result["echo"] == "after"
