"""The ai step of `fleet demo` (registered as `workers.ai.demo:scenario`): embeddings on the
bundled local model, and a summary when a chat API answers at AI_BASE_URL, requested through
the domain's client as a product would."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any
from uuid import UUID

from shared.cli.scenario import Scenario
from shared.runtime import Runtime

from . import store
from .client import request_ai_task
from .settings import ai_settings

SENTENCES = [
    "Invoices are due thirty days after issue.",
    "Payment is expected within a month of the invoice date.",
    "The lottery draws a winner when the round ends.",
]
ARTICLE = (
    "The outbox pattern writes an event in the same database transaction as the business "
    "change it announces. A relay publishes committed events to the message broker and marks "
    "them published; a crash between the two leaves the event pending, so it is published "
    "later, never lost, and never published for a rolled-back change."
)


def chat_api_answers(base_url: str, timeout: float = 2.0) -> bool:
    """Whether an HTTP server answers at `base_url` (any status: /models may need the key)."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


class AiScenario(Scenario):
    """Embeddings on the bundled local model; a summary when a chat API answers."""

    def __init__(self, org: UUID) -> None:
        super().__init__("ai")
        self.org = org
        self.tasks: dict[str, UUID] = {}

    def start(self, rt: Runtime) -> None:
        base_url = ai_settings().base_url
        requests: list[tuple[str, str | list[str], dict[str, Any]]] = [("embed", SENTENCES, {})]
        if chat_api_answers(base_url):
            requests.append(("summarize", ARTICLE, {"max_words": 40}))
        else:
            self.notes.append(
                f"AI summary skipped: no chat API answers at AI_BASE_URL={base_url} "
                "(run Ollama there, or set AI_BASE_URL / AI_API_KEY / AI_MODEL)"
            )
        # Sent at once (not through the outbox): the worker finds the row, or writes it from
        # the payload if it is faster than this commit.
        with rt.sessions() as session, session.begin():
            for task, data, params in requests:
                request = request_ai_task(
                    session, org_id=self.org, task=task, input=data, params=params, via="send"
                )
                self.tasks[task] = request.task_id

    def results(self, rt: Runtime) -> list[str]:
        with rt.pool.connection() as conn:
            rows = [store.get(conn, task_id, self.org) for task_id in self.tasks.values()]
        lines = [
            f"AI task {row.task}: {row.status} (table ai_tasks; `fleet ai --help`)"
            for row in rows
            if row is not None
        ]
        return lines + self.notes


def scenario(org: UUID, *, small: bool) -> Scenario:
    """The same two tasks in a `--small` run (they are small already)."""
    return AiScenario(org)
