"""The SMTP sink that `make run` starts when no SMTP server answers (workers/email/embedded.py)."""

from __future__ import annotations

import os
import smtplib
from email.message import EmailMessage
from pathlib import Path

import pytest

from shared.config import get_settings
from shared.launcher.net import free_port
from tests.support.env import test_env
from workers.email import embedded

pytestmark = pytest.mark.slow


def test_without_an_smtp_server_the_sink_keeps_each_message_under_var_mail(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    port = free_port()
    service = embedded.resolve("127.0.0.1", port, tmp_path, env={**os.environ, **test_env()})
    try:
        assert service.embedded and service.url == f"smtp://127.0.0.1:{port}"
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "hi"
        message.set_content("hello from the launcher test")
        with smtplib.SMTP("127.0.0.1", port, timeout=5) as client:
            client.send_message(message)
        stored = list((tmp_path / "mail").glob("*.eml"))
        assert len(stored) == 1 and "hello from the launcher test" in stored[0].read_text()
        # A second launcher finds it answering and uses it rather than starting another.
        again = embedded.resolve("127.0.0.1", port, tmp_path, env={})
        assert not again.embedded
    finally:
        service.stop()
    assert not embedded.answers("127.0.0.1", port)


def test_the_launcher_hook_reads_smtp_host_and_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "log").mkdir()
    port = free_port()
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(port))
    get_settings.cache_clear()
    said: list[str] = []
    env = {**os.environ, **test_env()}
    try:
        service = embedded.start(tmp_path, env, said.append)
        try:
            assert service.embedded and service.url == f"smtp://127.0.0.1:{port}"
            assert embedded.answers("127.0.0.1", port)
            assert service.describe().startswith("started embedded SMTP sink")
        finally:
            service.stop()
    finally:
        get_settings.cache_clear()
