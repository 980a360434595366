"""No double cost: a stored result is answered again, a task in flight is not run twice; and
prompts and outputs stay out of the logs unless the debug setting says so."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import dramatiq
import pytest

from shared.errors import RetryLater
from shared.jobs.context import JobContext
from shared.observability.logging import configure_logging
from shared.runtime import Runtime
from tests.support.wait import wait_run
from tests.workers.ai.conftest import fake_ai_settings, send_task, task_row, wait_task
from workers.ai.contracts import AiRunV1
from workers.ai.run import run_task
from workers.ai.wiring import Ai, build_ai


def test_a_redelivery_after_the_result_was_stored_never_calls_the_provider_again(
    runtime, make_ai_worker, fake_ai, db
) -> None:
    # Given a job whose message we keep exactly as Redis holds it
    payload, sent = send_task("summarize", "[case:once] text")
    ns, client = runtime.settings.broker_namespace, runtime.broker.client
    (raw,) = client.hvals(f"{ns}:ai.msgs")
    worker = make_ai_worker()
    wait_run(sent.job_id, "COMPLETED")
    first = task_row(db, payload["entity_id"])
    # When the worker "died" after storing the result but before recording the run
    db.execute(
        "UPDATE job_runs SET status = 'RUNNING', finished_at = NULL, result = NULL WHERE job_id = %s",
        (sent.job_id,),
    )
    worker.broker.enqueue(dramatiq.Message.decode(raw))

    # Then the redelivery answers the stored result: no second call, no second cost
    run = wait_run(sent.job_id, "COMPLETED")  # RUNNING until the redelivery finishes
    assert run.result["reused"] is True and run.result["tokens_in"] == first["tokens_in"]
    assert len(fake_ai.calls("once")) == 1
    usage = db.execute(
        "SELECT requests FROM ai_usage WHERE org_id = %s", (payload["org_id"],)
    ).fetchone()
    assert usage == (1,)
    assert task_row(db, payload["entity_id"])["result"] == first["result"]


@pytest.fixture
def direct_ai(runtime: Runtime, fake_ai) -> Iterator[callable]:  # type: ignore[valid-type]
    """An `Ai` on its own runtime (settings overridden per test), for calling the domain directly."""
    built: list[Runtime] = []

    def make(**overrides: object) -> Ai:
        rt = Runtime(runtime.settings)
        built.append(rt)
        return build_ai(rt, settings=fake_ai_settings(fake_ai.url, **overrides))

    yield make
    for rt in built:
        rt.close()


def _job(payload: AiRunV1) -> JobContext:
    return JobContext(
        job_id=f"test:{payload.entity_id}", job_name="ai:run", queue="ai", org_id=payload.org_id,
        attempt=1, max_attempts=2, message_id="m",
    )  # fmt: skip


def test_a_task_held_by_a_live_lease_waits_instead_of_calling_again(direct_ai, fake_ai, db) -> None:
    ai = direct_ai()
    payload = AiRunV1(
        org_id=uuid.uuid4(), entity_id=uuid.uuid4(), task="summarize", input="[case:held] t"
    )
    lease = datetime.now(UTC) + timedelta(seconds=8)
    db.execute(
        "INSERT INTO ai_tasks (id, org_id, task, input, status, lease_until) "
        "VALUES (%s, %s, 'summarize', '\"[case:held] t\"', 'RUNNING', %s)",
        (payload.entity_id, payload.org_id, lease),
    )

    with pytest.raises(RetryLater) as waited:
        run_task(payload, _job(payload), ai)

    assert 7_000 <= waited.value.delay_ms <= 8_200
    assert fake_ai.calls("held") == []
    # Once the lease has expired, a delivery takes the task over
    db.execute(
        "UPDATE ai_tasks SET lease_until = now() - interval '1 second' WHERE id = %s",
        (payload.entity_id,),
    )
    assert run_task(payload, _job(payload), ai)["status"] == "SUCCEEDED"
    assert len(fake_ai.calls("held")) == 1


def test_a_task_of_another_org_is_not_found(direct_ai, fake_ai, db) -> None:
    ai = direct_ai()
    mine = AiRunV1(org_id=uuid.uuid4(), entity_id=uuid.uuid4(), task="summarize", input="x")
    run_task(mine, _job(mine), ai)
    theirs = mine.model_copy(update={"org_id": uuid.uuid4()})

    with pytest.raises(Exception, match="no AI task") as failed:
        run_task(theirs, _job(theirs), ai)

    assert getattr(failed.value, "code", None) == "NOT_FOUND"


@pytest.mark.parametrize("debug", [False, True])
def test_prompts_and_outputs_are_logged_only_with_the_debug_setting(
    direct_ai, fake_ai, db, capfd: pytest.CaptureFixture[str], debug: bool
) -> None:
    configure_logging(level="INFO", fmt="json", process="test-ai")
    ai = direct_ai(log_content=debug)
    secret_in, secret_out = f"PROMPT-{uuid.uuid4().hex}", f"OUTPUT-{uuid.uuid4().hex}"
    from tests.workers.ai.fake_openai import Reply

    fake_ai.script("log", Reply(content=secret_out))
    payload = AiRunV1(
        org_id=uuid.uuid4(),
        entity_id=uuid.uuid4(),
        task="summarize",
        input=f"[case:log] {secret_in}",
    )

    run_task(payload, _job(payload), ai)

    captured = capfd.readouterr()
    logs = captured.out + captured.err
    assert '"event": "ai.call"' in logs  # the call is logged either way, with its figures
    assert (secret_in in logs, secret_out in logs) == (debug, debug)
    assert wait_task(db, str(payload.entity_id), "SUCCEEDED")["result"]["summary"] == secret_out


def test_a_failed_job_is_logged_by_the_worker_without_its_input(
    ai_worker, fake_ai, capfd: pytest.CaptureFixture[str]
) -> None:
    from tests.workers.ai.fake_openai import Reply

    configure_logging(level="INFO", fmt="json", process="test-ai")
    secret = f"PROMPT-{uuid.uuid4().hex}"
    fake_ai.script("leak", Reply(status=400))
    _, sent = send_task("summarize", f"[case:leak] {secret}")

    wait_run(sent.job_id, "DEAD")

    captured = capfd.readouterr()
    logs = captured.out + captured.err
    assert "Failed to process message ai:run(message_id=" in logs  # Dramatiq's line, redacted
    assert secret not in logs
