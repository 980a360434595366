"""The SMTP sink and the EVM node that `make run` starts when none is configured."""

from __future__ import annotations

import json
import os
import smtplib
import stat
from email.message import EmailMessage
from pathlib import Path

import pytest

from shared.launcher.embedded import evm, smtp
from shared.launcher.net import free_port
from tests.support.env import test_env

pytestmark = pytest.mark.slow


def test_without_an_smtp_server_the_sink_keeps_each_message_under_var_mail(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    port = free_port()
    service = smtp.resolve("127.0.0.1", port, tmp_path, env={**os.environ, **test_env()})
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
        again = smtp.resolve("127.0.0.1", port, tmp_path, env={})
        assert not again.embedded
    finally:
        service.stop()
    assert not smtp.answers("127.0.0.1", port)


def test_without_an_evm_node_anvil_starts_and_the_contracts_are_deployed(
    tmp_path: Path, database: str
) -> None:
    (tmp_path / "log").mkdir()
    keys = evm.dev_keys(tmp_path, {})
    kek_file = tmp_path / "chain" / "kek.json"
    assert stat.S_IMODE(kek_file.stat().st_mode) == 0o600
    assert evm.dev_keys(tmp_path, {}) == keys  # created once, then reused
    assert evm.dev_keys(tmp_path, {"CHAIN_KEKS": "{}"}) == {}  # the environment's own wins

    url = f"http://127.0.0.1:{free_port()}"
    service = evm.resolve(url, tmp_path, env={})
    try:
        assert service.embedded and service.url == url
        env = {**os.environ, **test_env(), **keys, "CHAIN_RPC_URL": url}
        summary = evm.deploy(env, tmp_path / "log" / "deploy.log")
        assert "BlockLucky 0x" in summary and "BlockLuckyPOAP 0x" in summary
        assert json.dumps(keys["CHAIN_KEKS"]) not in (tmp_path / "log" / "deploy.log").read_text()
    finally:
        service.stop()
    assert not evm.answers(url)
