"""The EVM node that `make run` starts when none is configured."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from shared.launcher.net import free_port
from shared.runtime import Runtime
from tests.support.env import test_env
from workers.chain_actions import embedded as evm

pytestmark = pytest.mark.slow


def test_without_an_evm_node_anvil_starts_and_the_contracts_are_deployed(
    tmp_path: Path, runtime: Runtime
) -> None:
    # `runtime`: a clean database. The deploy signs with the operator wallet it finds there, and
    # the other tests of this folder leave theirs, sealed under the test KEK, not this one's.
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
