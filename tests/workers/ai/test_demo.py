"""The ai step of `fleet demo`: its tasks requested through the client and run by the worker;
the summary left out, with the reason, when no chat API answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from shared.config import get_settings
from tests.workers.ai.conftest import AiWorker, wait_task
from tests.workers.ai.fake_openai import FakeOpenAI
from workers.ai.demo import AiScenario, scenario


@pytest.fixture
def ai_base_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """AI_BASE_URL as the demo reads it (the process's settings), restored afterwards."""
    yield monkeypatch
    get_settings.cache_clear()


def start(monkeypatch: pytest.MonkeyPatch, url: str, worker: AiWorker) -> AiScenario:
    monkeypatch.setenv("AI_BASE_URL", url)
    get_settings.cache_clear()
    step = scenario(uuid.uuid4(), small=True)
    assert isinstance(step, AiScenario)
    step.start(worker.runtime)
    return step


@pytest.mark.slow
def test_the_demo_embeds_and_summarizes_when_a_chat_api_answers(
    ai_worker: AiWorker,
    fake_ai: FakeOpenAI,
    db: psycopg.Connection[Any],
    ai_base_url: pytest.MonkeyPatch,
) -> None:
    step = start(ai_base_url, fake_ai.url, ai_worker)

    assert set(step.tasks) == {"embed", "summarize"}
    for task_id in step.tasks.values():
        wait_task(db, str(task_id), "SUCCEEDED", timeout=30)
    assert sorted(step.results(ai_worker.runtime)) == [
        "AI task embed: SUCCEEDED (table ai_tasks; `fleet ai --help`)",
        "AI task summarize: SUCCEEDED (table ai_tasks; `fleet ai --help`)",
    ]


@pytest.mark.slow
def test_the_demo_only_embeds_when_no_chat_api_answers(
    ai_worker: AiWorker, db: psycopg.Connection[Any], ai_base_url: pytest.MonkeyPatch
) -> None:
    nowhere = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    step = start(ai_base_url, nowhere, ai_worker)

    assert list(step.tasks) == ["embed"]
    wait_task(db, str(step.tasks["embed"]), "SUCCEEDED", timeout=30)
    embed, skipped = step.results(ai_worker.runtime)
    assert embed == "AI task embed: SUCCEEDED (table ai_tasks; `fleet ai --help`)"
    assert skipped.startswith(f"AI summary skipped: no chat API answers at AI_BASE_URL={nowhere}")
