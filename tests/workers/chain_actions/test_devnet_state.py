"""`make run`'s anvil (the launcher's embedded EVM node) keeps its chain across a restart: the
same genesis, the contracts deployed once, the rounds where the players left them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chain import devnet
from chain.abi import LOTTERY, decode_result, encode_call
from chain.client import ChainClient
from tests.support.chain.fixtures import chain_env
from tests.support.chain.world import TICKET, World
from workers.chain_actions import embedded as evm

pytestmark = pytest.mark.slow


def test_the_embedded_anvil_keeps_its_chain_and_contracts_across_a_restart(
    tmp_path: Path, world: World, anvil: devnet.Anvil, db: Any
) -> None:
    url = f"http://127.0.0.1:{devnet.free_port()}"
    env = {**chain_env(anvil), "CHAIN_RPC_URL": url, "CHAIN_ID": "31337"}
    node = evm.resolve(url, tmp_path, env={})
    try:
        first = evm.deploy(env, tmp_path / "deploy.log")
        client = ChainClient.connect(url)
        genesis = client.request("eth_getBlockByNumber", ["0x0", False])["hash"]
        (lottery,) = db.execute(
            "SELECT address FROM chain_contracts WHERE chain_id = 31337 AND name = %s", (LOTTERY,)
        ).fetchone()
        player = world.accounts[1]
        devnet.transact(
            client, player, lottery, encode_call(LOTTERY, "buyTickets", 1), value=TICKET
        )
    finally:
        node.stop()

    node = evm.resolve(url, tmp_path, env={})  # `make run` again
    try:
        assert client.request("eth_getBlockByNumber", ["0x0", False])["hash"] == genesis
        assert evm.deploy(env, tmp_path / "deploy.log") == first  # kept, not deployed again
        call = encode_call(LOTTERY, "ticketsOf", 1, player.address)
        assert decode_result(LOTTERY, "ticketsOf", client.call({"to": lottery, "data": call})) == (
            1,
        )
    finally:
        node.stop()
