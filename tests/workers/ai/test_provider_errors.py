"""Provider failures through the worker: 429/5xx with Retry-After, 5xx, timeouts, 4xx, bad bodies.

Decision under test (workers/ai/run.py): a Retry-After is honoured as a delayed retry that does
not spend an attempt (bounded by AI_MAX_DEFERRALS); without it a 5xx or a timeout spends one.
"""

from __future__ import annotations

from tests.support.wait import wait_run
from tests.workers.ai.conftest import READ_TIMEOUT_S, send_task, task_row, wait_task
from tests.workers.ai.fake_openai import Reply


def test_429_with_retry_after_is_retried_after_that_delay_without_spending_an_attempt(
    ai_worker, fake_ai, db
) -> None:
    fake_ai.script("busy", Reply(status=429, headers={"Retry-After": "1"}))
    payload, sent = send_task("summarize", "[case:busy] text")

    run = wait_run(sent.job_id, "COMPLETED", timeout=15)

    first, second = fake_ai.calls("busy")
    assert second.at - first.at >= 1.0  # Retry-After honoured
    row = task_row(db, payload["entity_id"])
    assert run.attempt == 1 and row["deferrals"] == 1 and row["status"] == "SUCCEEDED"
    # The throttled call cost nothing: only the successful one is in the usage
    assert db.execute(
        "SELECT requests FROM ai_usage WHERE org_id = %s", (payload["org_id"],)
    ).fetchone() == (1,)


def test_503_with_an_http_date_retry_after_is_also_a_delayed_retry(ai_worker, fake_ai) -> None:
    fake_ai.script(
        "down", Reply(status=503, headers={"Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"})
    )
    _, sent = send_task("summarize", "[case:down] text")

    run = wait_run(sent.job_id, "COMPLETED", timeout=15)

    assert run.attempt == 1 and len(fake_ai.calls("down")) == 2


def test_500_without_retry_after_spends_an_attempt_and_the_retry_succeeds(
    ai_worker, fake_ai, db
) -> None:
    fake_ai.script("boom", Reply(status=500))
    payload, sent = send_task("summarize", "[case:boom] text")

    run = wait_run(sent.job_id, "COMPLETED", timeout=15)

    assert run.attempt == 2 and len(fake_ai.calls("boom")) == 2
    assert task_row(db, payload["entity_id"])["attempts"] == 2


def test_500_on_every_attempt_is_dead_after_the_ai_policy_and_the_task_failed(
    ai_worker, fake_ai, db
) -> None:
    fake_ai.script("dead", Reply(status=500), Reply(status=502))
    payload, sent = send_task("summarize", "[case:dead] text")

    run = wait_run(sent.job_id, "DEAD", timeout=15)

    assert run.attempt == 2 and run.error_code == "PROVIDER_UNAVAILABLE"
    assert "attempts exhausted (2/2)" in run.error and "provider answered 502" in run.error
    row = task_row(db, payload["entity_id"])
    assert row["status"] == "FAILED" and row["error_code"] == "PROVIDER_UNAVAILABLE"


def test_a_slow_response_times_out_and_is_retried(ai_worker, fake_ai) -> None:
    fake_ai.script("slow", Reply(delay_s=READ_TIMEOUT_S + 1.0))
    _, sent = send_task("summarize", "[case:slow] text")

    run = wait_run(sent.job_id, "COMPLETED", timeout=15)

    assert run.attempt == 2 and len(fake_ai.calls("slow")) == 2


def test_a_4xx_is_permanent_with_the_providers_message(ai_worker, fake_ai, db) -> None:
    fake_ai.script(
        "denied", Reply(status=400, body={"error": {"message": "model `nope` does not exist"}})
    )
    payload, sent = send_task("summarize", "[case:denied] text", {"model": "nope"})

    run = wait_run(sent.job_id, "DEAD")

    assert run.attempt == 1 and run.error_code == "PROVIDER_REJECTED"
    assert "provider answered 400: model `nope` does not exist" in run.error
    assert len(fake_ai.calls("denied")) == 1
    assert task_row(db, payload["entity_id"])["status"] == "FAILED"


def test_a_success_status_with_a_body_that_is_not_json_is_retried(ai_worker, fake_ai) -> None:
    fake_ai.script("garbage", Reply(raw=b"<html>upstream proxy page</html>"))
    _, sent = send_task("summarize", "[case:garbage] text")

    run = wait_run(sent.job_id, "COMPLETED", timeout=15)

    assert run.attempt == 2


def test_a_provider_throttling_for_good_spends_attempts_once_the_deferrals_are_used(
    make_ai_worker, fake_ai, db
) -> None:
    make_ai_worker(max_deferrals=1)
    fake_ai.script(
        "forever", *[Reply(status=429, headers={"Retry-After": "0.2"}) for _ in range(3)]
    )
    payload, sent = send_task("summarize", "[case:forever] text")

    run = wait_run(sent.job_id, "DEAD", timeout=15)

    # one deferral, then the two attempts of the ai policy
    assert len(fake_ai.calls("forever")) == 3 and run.attempt == 2
    assert run.error_code == "PROVIDER_THROTTLED"
    assert wait_task(db, payload["entity_id"], "FAILED")["deferrals"] == 1
