"""The EVM library's development node (`chain.devnet.start_anvil`): it waits for the
node to answer, and gives up at once, with a clear error, when the node exits instead."""

from __future__ import annotations

import time

import pytest

from chain import devnet


def test_a_node_that_exits_is_reported_at_once_not_after_the_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="anvil did not start on port"):
        devnet.start_anvil(extra=("--no-such-option",), timeout_s=30)
    assert time.monotonic() - started < 10


def test_a_node_that_starts_answers() -> None:
    node = devnet.start_anvil(chain_id=41_234)
    try:
        assert node.chain_id == 41_234
    finally:
        node.stop()
