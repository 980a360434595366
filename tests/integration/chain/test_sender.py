"""The transaction sender against anvil with mining switched off: replacement of a transaction
that the node dropped or that stays unmined, with the same nonce and bumped fees."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chain import devnet
from chain.abi import BADGE, encode_call
from chain.transactions import TxPolicy, TxRequest, TxSender
from tests.support.chain.world import World
from tests.support.wait import wait_for


@pytest.mark.timing  # a time bound: make test runs it in the timing lane
@pytest.mark.parametrize("fate", ["dropped", "stuck"])
def test_an_unmined_transaction_is_replaced_with_the_same_nonce(
    world: World, deps: Any, fate: str
) -> None:
    client, operator, player = world.client, world.operator, world.accounts[6].address
    sender = TxSender(
        client, deps.sender.locks, deps.journal, TxPolicy(replace_after_s=1.0, receipt_timeout_s=30)
    )
    key = f"replace-{fate}"
    deps.journal.begin(key, type="MINT_BADGE", round_id=1, address=player)
    nonce = world.nonce(operator.address)
    devnet.set_automine(client, False)
    with ThreadPoolExecutor(1) as pool:
        request = TxRequest(key, world.contracts[BADGE], encode_call(BADGE, "mintBadge", player, 1))
        future = pool.submit(sender.execute, operator, request)
        first = wait_for(
            lambda: deps.journal.in_flight(key), timeout=10, what="a journaled broadcast"
        ).latest
        wait_for(
            lambda: client.transaction(first.tx_hash),
            timeout=10,
            what="the transaction in the pool",
        )
        if fate == "dropped":
            devnet.drop_transaction(client, first.tx_hash)
            assert client.transaction(first.tx_hash) is None
        flight = wait_for(
            lambda: (f := deps.journal.in_flight(key)) and len(f.broadcasts) >= 2 and f,
            timeout=10,
            what="a replacement",
        )
        replacement = flight.broadcasts[1]
        assert replacement.nonce == first.nonce == nonce
        assert replacement.max_fee > first.max_fee and replacement.priority_fee > first.priority_fee
        devnet.mine(client)
        outcome = future.result(timeout=20)
    assert outcome.confirmed and outcome.nonce == nonce and outcome.tx_hash != first.tx_hash
    assert client.receipt(first.tx_hash) is None
    assert world.nonce(operator.address) == nonce + 1  # one transaction, whatever was broadcast
    assert world.has_badge(player, 1)


def test_the_signer_lock_key_is_in_the_fleet_namespace(
    world: World, deps: Any, chain_runtime: Any, chain_settings: Any
) -> None:
    """Two fleets on one Redis (two namespaces) do not share, or clear, each other's locks."""
    from scheduler.chain import jobs as chain
    from scheduler.settings import IndexerSettings, KeeperSettings

    namespace = chain_runtime.settings.broker_namespace
    key = deps.sender.locks.key(world.operator.address)
    assert key.startswith(f"{namespace}:chain:signer-lock:")
    # The scheduler's keeper signs with the same operator: the same lock as the worker's.
    config = chain.ChainConfig(chain_settings, IndexerSettings(), KeeperSettings())
    keeper = chain.build(chain_runtime, config).keeper.sender.locks.key(world.operator.address)
    assert keeper == key
    with deps.sender.locks.hold(world.operator.address):
        assert deps.sender.locks.client.get(key) is not None


@pytest.mark.timing  # a time bound: make test runs it in the timing lane
def test_a_transaction_dropped_from_the_pool_is_put_back_before_any_replacement(
    world: World, deps: Any
) -> None:
    """Not mined and unknown to the node (dropped, or taken out by a reorg between two polls):
    the same signed transaction goes back within seconds, not at the next replacement."""
    client, operator, player = world.client, world.operator, world.accounts[6].address
    sender = TxSender(
        client, deps.sender.locks, deps.journal, TxPolicy(replace_after_s=60, receipt_timeout_s=30)
    )
    key = "put-back"
    deps.journal.begin(key, type="MINT_BADGE", round_id=2, address=player)
    devnet.set_automine(client, False)
    with ThreadPoolExecutor(1) as pool:
        request = TxRequest(key, world.contracts[BADGE], encode_call(BADGE, "mintBadge", player, 2))
        future = pool.submit(sender.execute, operator, request)
        first = wait_for(
            lambda: deps.journal.in_flight(key), timeout=10, what="a journaled broadcast"
        ).latest
        wait_for(lambda: client.transaction(first.tx_hash), timeout=10, what="it in the pool")
        devnet.drop_transaction(client, first.tx_hash)
        wait_for(lambda: client.transaction(first.tx_hash), timeout=10, what="it back in the pool")
        devnet.mine(client)
        outcome = future.result(timeout=20)
    assert outcome.confirmed and outcome.tx_hash == first.tx_hash and outcome.broadcasts == 1
    assert world.has_badge(player, 2)
