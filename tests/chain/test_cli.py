"""`fleet chain deploy` and `fleet wallets rotate-kek` as an operator runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.chain import devnet
from shared.chain.abi import LOTTERY, decode_result, encode_call
from shared.chain.wallets import count_by_kek

from .conftest import chain_env
from .world import KEK_A, KEK_B, World

pytestmark = pytest.mark.slow
FLEET = str(Path(sys.executable).with_name("fleet"))


def fleet(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [FLEET, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_deploy_records_the_contracts_and_rotate_kek_reseals_every_key(
    world: World, anvil: devnet.Anvil, db: Any
) -> None:
    env = chain_env(anvil)
    deployed = json.loads(fleet(env, "chain", "deploy", "--dev", "--json", "--min-players", "3"))
    assert deployed["chain_id"] == anvil.chain_id and deployed["operator"] == world.operator.address
    assert deployed[LOTTERY] != world.contracts[LOTTERY]
    rows = dict(
        db.execute(
            "SELECT name, address FROM chain_contracts WHERE chain_id = %s", (anvil.chain_id,)
        )
    )
    assert rows == {k: v for k, v in deployed.items() if k not in ("chain_id", "operator")}
    call = world.client.call({"to": deployed[LOTTERY], "data": encode_call(LOTTERY, "minPlayers")})
    assert decode_result(LOTTERY, "minPlayers", call) == (3,)

    rotated = {"CHAIN_KEKS": json.dumps({"a": KEK_A, "b": KEK_B}), "CHAIN_KEK_ID": "b"}
    out = fleet({**env, **rotated}, "wallets", "rotate-kek")
    assert "re-sealed 7 key(s) under 'b'" in out
    assert count_by_kek(db) == {"b": 7, None: 1}
    assert KEK_A not in out and KEK_B not in out
