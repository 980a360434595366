"""The pure decision taken after each attempt (shared/jobs/outcome.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from dramatiq.errors import ActorNotFound
from dramatiq.middleware.time_limit import TimeLimitExceeded

from shared.config import RetryPolicy, Settings, default_retries
from shared.errors import (
    AlreadyDone,
    BrokerUnavailable,
    InvalidPayload,
    JobCanceled,
    PermanentError,
    RetryLater,
)
from shared.jobs import outcome
from shared.jobs.outcome import backoff_ms, decide

POLICY = RetryPolicy(max_attempts=3, min_backoff_ms=2_000, max_backoff_ms=60_000)


def _decide(attempt: int, exception: BaseException | None = None, result: object = None):
    return decide(
        attempt=attempt, policy=POLICY, result=result, exception=exception, rng=random.Random(7)
    )


@pytest.mark.parametrize(
    ("attempt", "exception", "status", "code", "requeue"),
    [
        (1, None, "COMPLETED", None, False),
        (1, AlreadyDone("sent before"), "COMPLETED", None, False),
        (1, RuntimeError("flaky"), "FAILED", "RUNTIMEERROR", True),
        (2, TimeLimitExceeded(), "FAILED", "TIMEOUT", True),
        (1, BrokerUnavailable("redis down"), "FAILED", "BROKER_UNAVAILABLE", True),
        (3, RuntimeError("flaky"), "DEAD", "RUNTIMEERROR", False),
        (1, PermanentError("no", code="SMTP_550"), "DEAD", "SMTP_550", False),
        (1, InvalidPayload("bad"), "DEAD", "INVALID_PAYLOAD", False),
        (1, JobCanceled("stop"), "CANCELED", "CANCELED", False),
        (1, ActorNotFound("x:y"), "DEAD", "UNKNOWN_JOB", False),
        (2, RetryLater("rate limited", delay_ms=750), "QUEUED", "RETRY_LATER", True),
    ],
)
def test_each_exception_maps_to_one_outcome(attempt, exception, status, code, requeue) -> None:
    outcome = _decide(attempt, exception)
    assert outcome.status == status
    assert outcome.error_code == code
    assert (outcome.requeue_delay_ms is not None) is requeue


def test_a_retry_is_the_next_attempt_and_retry_later_is_not() -> None:
    assert _decide(1, RuntimeError()).next_attempt == 2
    later = _decide(2, RetryLater(delay_ms=750))
    assert later.next_attempt == 2 and later.requeue_delay_ms == 750


def test_exhausted_attempts_say_so_in_the_error() -> None:
    outcome = _decide(3, ValueError("bad gateway"))
    assert outcome.error is not None
    assert outcome.error.startswith("attempts exhausted (3/3): ValueError: bad gateway")


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [(1, 2_000, 2_500), (2, 4_000, 5_000), (3, 8_000, 10_000), (9, 60_000, 60_000)],
)
def test_backoff_is_exponential_from_the_minimum_with_bounded_jitter(
    attempt: int, low: int, high: int
) -> None:
    rng = random.Random(1)
    samples = [backoff_ms(POLICY, attempt, rng) for _ in range(200)]
    assert low <= min(samples) and max(samples) <= high


def test_large_results_are_not_stored_whole() -> None:
    result = {"blob": "x" * 10_000}
    outcome = decide(
        attempt=1, policy=POLICY, result=result, rng=random.Random(), result_max_bytes=100
    )
    assert outcome.result == {"truncated": True, "size": len(json.dumps(result))}
    small = decide(
        attempt=1, policy=POLICY, result={"ok": 1}, rng=random.Random(), result_max_bytes=100
    )
    assert small.result == {"ok": 1}


def test_queue_policies_are_the_design_defaults_not_dramatiqs() -> None:
    settings = Settings(_env_file=None)
    expected = {
        "email": (3, 2_000),
        "ai": (2, 5_000),
        "export": (3, 5_000),
        "doc": (5, 3_000),
        "chain-actions": (5, 1_000),
    }
    for queue, (attempts, first) in expected.items():
        policy = settings.retry_policy(queue)
        assert (policy.max_attempts, policy.min_backoff_ms) == (attempts, first), queue
    assert settings.retry_policy("anything-else") == RetryPolicy(
        max_attempts=5, min_backoff_ms=3_000
    )
    # The design's five queues at least: a further domain brings its own (a sixth domain's
    # queue failed this test when it required exactly these five, issue 33).
    assert set(expected) <= set(default_retries())


def test_a_queue_policy_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRIES", '{"email": {"max_attempts": 7, "min_backoff_ms": 10}}')
    assert Settings(_env_file=None).retry_policy("email").max_attempts == 7


def test_the_worker_broker_has_no_dramatiq_retries_middleware(settings: Settings) -> None:
    from dramatiq.middleware import Retries

    from shared.bootstrap import worker_broker

    broker = worker_broker(settings, "unit")
    names = [type(m).__name__ for m in broker.middleware]
    assert not any(isinstance(m, Retries) for m in broker.middleware), names
    # Metrics must be registered before Tracking: after-hooks run in reverse, and Metrics reads
    # the outcome Tracking decided.
    assert names.index("Metrics") < names.index("Tracking")


def test_a_write_result_is_given_to_every_caller_that_waits_for_it() -> None:
    """The acker and a taken-over run both wait for one outcome: neither may consume it."""
    import threading

    from shared.jobs.run_writer import _Waiter

    waiter = _Waiter()
    threading.Timer(0.05, waiter.set_result, args=("done",)).start()

    assert waiter.result(2.0) == "done"
    assert waiter.result(0.1) == "done"
    assert waiter.result(0.1) == "done"


def _raised(call: Any) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("nothing raised")


def test_an_invalid_payload_error_has_no_frames() -> None:
    """Before: `INVALID_PAYLOAD` errors ended with `File ".../site-packages/dramatiq/worker.py"`."""

    def refuse() -> None:
        raise InvalidPayload("email:send: recipient_email: not an address")

    error = outcome.describe(_raised(refuse))
    assert error == "InvalidPayload: email:send: recipient_email: not an address"


def test_frames_name_files_without_install_paths() -> None:
    import dramatiq

    error = outcome.describe(_raised(lambda: dramatiq.Message.decode(b"not json")))
    assert 'File "dramatiq/message.py"' in error
    assert 'File "tests/unit/test_outcome.py"' in error
    assert "site-packages" not in error and str(Path(__file__).parent) not in error
    assert all(not line.strip().startswith('File "/') for line in error.splitlines())


def test_a_permanent_failure_stores_its_message_without_frames() -> None:
    """Before: a permanent failure's run error carried the traceback's frames after the message;
    a permanent error is the job's own verdict (NOT_A_PLAYER, NODE_UNAVAILABLE): its message is
    the explanation. An unexpected error keeps its frames."""

    def refuse() -> None:
        raise PermanentError("no ticket of 0xabc in round 3", code="NOT_A_PLAYER")

    decided = outcome.decide(
        attempt=1, policy=POLICY, exception=_raised(refuse), rng=random.Random(0)
    )
    assert (decided.status, decided.error_code, decided.error) == (
        "DEAD",
        "NOT_A_PLAYER",
        "PermanentError: no ticket of 0xabc in round 3",
    )
    crashed = outcome.decide(
        attempt=1, policy=POLICY, exception=_raised(lambda: 1 / 0), rng=random.Random(0)
    )
    assert 'File "tests/unit/test_outcome.py"' in (crashed.error or "")
