from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from shared.config import RetryPolicy, Settings
from shared.jobs import catalog
from shared.jobs.send import SendResult
from shared.runtime import Runtime
from tests.support.inprocess import InProcessWorker, started_workers
from tests.support.wait import wait_for
from tests.workers.ai.fake_openai import FakeOpenAI
from workers.ai import actors
from workers.ai.settings import AiSettings
from workers.ai.wiring import Ai, build_ai, set_ai

#: The ai policy (2 attempts) with a backoff short enough for tests.
AI_RETRY = RetryPolicy(max_attempts=2, min_backoff_ms=300, max_backoff_ms=600)
READ_TIMEOUT_S = 1.0


@pytest.fixture(scope="session")
def fake_ai_server() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def fake_ai(fake_ai_server: FakeOpenAI) -> FakeOpenAI:
    fake_ai_server.reset()
    return fake_ai_server


def fake_ai_settings(url: str, **overrides: Any) -> AiSettings:
    """The ai domain's settings pointed at the fake API, with short timeouts and lease."""
    update: dict[str, Any] = {
        "base_url": url,
        "api_key": None,
        "model": "gpt-4o-mini",
        "read_timeout_s": READ_TIMEOUT_S,
        "connect_timeout_s": 1.0,
        "task_lease_s": 10.0,
    }
    update.update(overrides)
    return AiSettings().model_copy(update=update)


class AiWorker(InProcessWorker):
    """An in-process ai worker (fleet middleware, real Redis and Postgres) on the `ai` queue."""

    def __init__(self, settings: Settings, ai_settings: AiSettings) -> None:
        fast = settings.model_copy(update={"retries": {**settings.retries, "ai": AI_RETRY}})
        super().__init__(fast, service="test-ai", bind=actors.bind, queues={"ai"})
        self.ai: Ai = build_ai(self.runtime, settings=ai_settings)

    def stop(self) -> None:
        super().stop()
        self.ai.close()


@pytest.fixture
def make_ai_worker(
    runtime: Runtime, settings: Settings, fake_ai: FakeOpenAI
) -> Iterator[Callable[..., AiWorker]]:
    with started_workers(
        install=lambda worker: set_ai(worker.ai), uninstall=lambda: set_ai(None)
    ) as start:
        yield lambda **overrides: start(
            AiWorker(settings, fake_ai_settings(fake_ai.url, **overrides))
        )


@pytest.fixture
def ai_worker(make_ai_worker: Callable[..., AiWorker]) -> AiWorker:
    return make_ai_worker()


def send_task(
    task: str, text: Any, params: dict[str, Any] | None = None, *, org: uuid.UUID | None = None
) -> tuple[dict[str, Any], SendResult]:
    payload = {
        "org_id": str(org or uuid.uuid4()),
        "entity_id": str(uuid.uuid4()),
        "task": task,
        "input": text,
        "params": params or {},
    }
    return payload, catalog.AI_RUN.send(payload)


def task_row(db: Any, task_id: str) -> dict[str, Any] | None:
    from psycopg.rows import dict_row

    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM ai_tasks WHERE id = %s", (task_id,)).fetchone()


def wait_task(db: Any, task_id: str, status: str, timeout: float = 15.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        row = task_row(db, task_id)
        return row if row is not None and row["status"] == status else None

    return wait_for(probe, timeout=timeout, what=f"ai task {task_id} {status}")
