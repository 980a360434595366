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


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://x.example/reset?t=TOK", "https://x.example/reset?t=***"),
        ("go to https://x.example/?a=1&t=TOK now", "go to https://x.example/?a=***&t=*** now"),
        ("https://ada:TOK@h.example/f", "https://ada:***@h.example/f"),
        ("https://TOK@h.example/f", "https://***@h.example/f"),
        (
            "https://h.example/cb#access_token=TOK&x=1",
            "https://h.example/cb#access_token=***&x=***",
        ),
        ("https://h.example/?TOK", "https://h.example/?***"),
        ("redis://127.0.0.1:6379/0 and https://h.example/doc#part", None),
        ("no url at all: t=TOK", None),
    ],
)
def test_the_tokens_of_urls_are_masked_whatever_their_key(text: str, shown: str | None) -> None:
    """Before: masking went by key name only: `"reset_link": "https://x/?t=tok"` showed in full
    in `fleet jobs show`, `fleet dlq show` and the logs."""
    assert redact({"reset_link": text}) == {"reset_link": shown or text}
    assert redact([text]) == [shown or text]


def test_a_url_token_in_a_log_line_is_masked(capsys: pytest.CaptureFixture[str]) -> None:
    import structlog

    from shared.observability.logging import configure_logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging(level="INFO", fmt="json")
    try:
        structlog.get_logger("t").info(
            "reset sent to https://x.example/?t=planted-url-token",
            link="https://u:planted-url-pass@h.example/",
        )
    finally:
        structlog.reset_defaults()
        root.handlers[:], root.level = handlers, level
    out = capsys.readouterr()
    text = out.out + out.err
    assert "reset sent to" in text
    assert "planted-url-token" not in text and "planted-url-pass" not in text
