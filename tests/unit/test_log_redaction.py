from __future__ import annotations

import logging

import dramatiq
import pytest

from shared.observability.logging import redact, redact_dramatiq_messages


def test_dramatiq_failure_lines_name_the_message_but_never_carry_its_payload(
    caplog: pytest.LogCaptureFixture,
) -> None:
    redact_dramatiq_messages()
    message = dramatiq.Message(
        queue_name="email",
        actor_name="email:send",
        args=({"recipient_email": "ada@example.com"},),
        kwargs={},
        options={},
    )
    with caplog.at_level(logging.INFO):
        logging.getLogger("dramatiq.worker.WorkerThread").error(
            "Failed to process message %s with unhandled exception.", message
        )
    assert "ada@example.com" not in caplog.text
    assert f"email:send(message_id={message.message_id}, arguments redacted)" in caplog.text


def test_secret_keys_are_masked_in_structured_events() -> None:
    event = {
        "event": "x",
        "payload": {"password": "hunter2", "nested": [{"api_key": "k", "ok": 1}]},
    }
    assert redact(event) == {
        "event": "x",
        "payload": {"password": "***", "nested": [{"api_key": "***", "ok": 1}]},
    }
