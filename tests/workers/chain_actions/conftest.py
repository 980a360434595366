"""The chain-actions domain's fixtures: the shared chain fixtures (tests/support/chain), the
domain's collaborators (`deps`) and its `dramatiq workers.chain_actions.app` processes."""

from __future__ import annotations

from tests.support.chain.fixtures import (
    anvil,
    chain_runtime,
    chain_settings,
    deployed,
    deps,
    workers,
    world,
)

__all__ = ["anvil", "chain_runtime", "chain_settings", "deployed", "deps", "workers", "world"]
