"""The kernel's EVM library against anvil: the shared chain fixtures (tests/support/chain).
`deps` gives the sender tests the lock and journal a worker signs with."""

from __future__ import annotations

from tests.support.chain.fixtures import (
    anvil,
    chain_runtime,
    chain_settings,
    deployed,
    deps,
    world,
)

__all__ = ["anvil", "chain_runtime", "chain_settings", "deployed", "deps", "world"]
