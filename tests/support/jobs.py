"""Test jobs on the `testq` queue, bound to whichever broker a test or worker process uses."""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any, Literal
from uuid import UUID

import dramatiq

from shared.contracts.base import Contract, Payload
from shared.errors import AlreadyDone, PermanentError, RetryLater
from shared.jobs.context import JobContext
from shared.jobs.handler import BoundJob, handler
from shared.jobs.message import MessageInfo
from shared.jobs.spec import JobSpec


class EchoV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID
    text: str


class EchoV2(Payload):
    """v2 renamed `text` to `message` and added `times`."""

    v: Literal[2] = 2
    entity_id: UUID
    message: str
    times: int = 1


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    data["message"] = data.pop("text")
    data["v"] = 2
    return data


ECHO = JobSpec(
    Contract[EchoV2]("test:echo", (EchoV1, EchoV2), {1: _v1_to_v2}),
    queue="testq",
    entity_type="echo",
)


class SleepV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID
    seconds: float
    marker: str = ""


SLEEP = JobSpec(Contract[SleepV1]("test:sleep", (SleepV1,)), queue="testq", entity_type="sleep")


class HoldV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID
    seconds: float
    tag: str = ""


#: Marks `hold <start|end> <job id> <pid> <time.time()> <tag>`: which process ran it, when
#: (how many ran at once, including those of a process killed mid-run).
HOLD = JobSpec(Contract[HoldV1]("test:hold", (HoldV1,)), queue="testq", entity_type="hold")

#: Every execution appends a line here when set (lets tests count executions across processes).
MARKS = os.environ.get("JOBFLEET_TEST_MARKS")


def mark(line: str) -> None:
    if MARKS:
        with open(MARKS, "a") as f:
            f.write(line + "\n")


def _marked(prefix: str) -> int:
    """How many lines of the marks file start with `prefix`."""
    if not MARKS:
        return 0
    with open(MARKS) as f:
        return sum(line.startswith(prefix) for line in f)


def bind(broker: dramatiq.Broker) -> dict[str, BoundJob[Any]]:
    @handler(ECHO, broker=broker)
    def echo(payload: EchoV2, job: JobContext) -> dict[str, Any]:
        mark(f"echo {job.job_id} {job.attempt}")
        if payload.message == "boom":
            raise RuntimeError("boom")
        if payload.message == "permanent":
            raise PermanentError("cannot ever work", code="TEST_PERMANENT")
        if payload.message == "done-before":
            raise AlreadyDone("it was done earlier")
        if payload.message == "later-once" and _marked(f"echo {job.job_id} ") == 1:
            raise RetryLater("not yet: once more in 200 ms", delay_ms=200)
        return {"echo": payload.message * payload.times, "attempt": job.attempt}

    @handler(SLEEP, broker=broker)
    def sleep(payload: SleepV1, job: JobContext) -> dict[str, Any]:
        mark(f"start {job.job_id} {payload.marker}")
        deadline = time.monotonic() + payload.seconds
        step = 0
        while time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            step += 1
            if step % 4 == 0:
                job.progress(step, int(payload.seconds / 0.05) + 1)
        mark(f"end {job.job_id} {payload.marker}")
        return {"slept": payload.seconds}

    @handler(HOLD, broker=broker)
    def hold(payload: HoldV1, job: JobContext) -> None:
        mark(f"hold start {job.job_id} {os.getpid()} {time.time():.4f} {payload.tag}")
        time.sleep(payload.seconds)
        mark(f"hold end {job.job_id} {os.getpid()} {time.time():.4f} {payload.tag}")

    return {"echo": echo, "sleep": sleep, "hold": hold}


#: An echo on a second test queue: the queue a test puts on a Redis server of its own
#: (REDIS_QUEUE_URLS, tests/integration/test_queue_shards.py).
ECHO_B = JobSpec(Contract[EchoV2]("test:echo-b", (EchoV2,)), queue="testq-b", entity_type="echo")


def bind_b(broker: dramatiq.Broker) -> dict[str, BoundJob[Any]]:
    @handler(ECHO_B, broker=broker)
    def echo_b(payload: EchoV2, job: JobContext) -> dict[str, Any]:
        mark(f"echo-b {job.job_id} {job.attempt}")
        return {"echo": payload.message}

    return {"echo_b": echo_b}


def raw_message(actor: str, *args: Any) -> dramatiq.Message[Any]:
    """A message on `testq` as another producer would write it: no job id, no tracking fields."""
    return dramatiq.Message(queue_name="testq", actor_name=actor, args=args, kwargs={}, options={})


class CrashV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID


#: A job that kills the process running it (a native crash, the OOM killer): worker processes
#: only.
CRASH = JobSpec(Contract[CrashV1]("test:crash", (CrashV1,)), queue="testq", entity_type="crash")


def bind_crash(broker: dramatiq.Broker) -> Any:
    @handler(CRASH, broker=broker)
    def crash(payload: CrashV1, job: JobContext) -> None:
        mark(f"crash {job.job_id} {job.attempt}")
        os.kill(os.getpid(), signal.SIGKILL)

    return crash


def message_info(job_id: str, payload: Any = None) -> MessageInfo:
    """What a worker knows of a `test:echo` message on `testq`, for run-writer tests."""
    return MessageInfo(
        job_id=job_id,
        job_name="test:echo",
        queue="testq",
        org_id=uuid.uuid4(),
        attempt=1,
        message_id=uuid.uuid4().hex,
        request_id=None,
        entity_type="test",
        entity_id=None,
        payload={"n": 1} if payload is None else payload,
        sent_at=None,
    )
