"""Acceptance fixtures: the shared chain fixtures (tests/support/chain) for `fleet chain ...`."""

from __future__ import annotations

from tests.support.chain.fixtures import anvil, deployed, world

__all__ = ["anvil", "deployed", "world"]
