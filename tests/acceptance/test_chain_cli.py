"""`fleet chain deploy` and `fleet wallets rotate-kek` as an operator runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from chain import devnet
from chain.abi import LOTTERY, decode_result, encode_call
from chain.wallets import count_by_kek
from tests.support.chain.fixtures import chain_env
from tests.support.chain.world import KEK_A, KEK_B, World

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


class _NotADevNode(BaseHTTPRequestHandler):
    """A JSON-RPC node of chain 1 (a "Geth" client) that records the methods it is asked."""

    asked: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.asked.append(request["method"])
        answers = {
            "eth_chainId": "0x1",
            "web3_clientVersion": "Geth/v1.14.0-stable/linux-amd64/go1.22",
        }
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if request["method"] in answers:
            body["result"] = answers[request["method"]]
        else:
            body["error"] = {"code": -32601, "message": "method not found"}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_deploy_dev_refuses_a_node_that_is_not_a_development_chain(
    world: World, anvil: devnet.Anvil, db: Any
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotADevNode)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        db.execute("DELETE FROM wallets WHERE kind = 'OPERATOR'")
        env = {**chain_env(anvil), "CHAIN_RPC_URL": f"http://127.0.0.1:{server.server_port}"}
        env.pop("CHAIN_ID")
        done = subprocess.run(
            [FLEET, "chain", "deploy", "--dev", "--json"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.shutdown()
    assert done.returncode != 0
    assert "not a development chain" in done.stderr and "chain 1, Geth" in done.stderr
    assert set(_NotADevNode.asked) <= {"eth_chainId", "web3_clientVersion"}  # nothing sent
    assert db.execute("SELECT count(*) FROM wallets WHERE kind = 'OPERATOR'").fetchone() == (0,)


def test_chain_reindex_rebuilds_from_a_block_and_refuses_one_not_indexed_yet(
    world: World, anvil: devnet.Anvil, db: Any
) -> None:
    env = {**chain_env(anvil), "INDEXER_CONFIRMATIONS": "0", "INDEXER_START_BLOCK": "0"}
    refused = subprocess.run(
        [FLEET, "chain", "reindex", "--from-block", "1"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert "not indexed yet" in refused.stderr and "Traceback" not in refused.stderr
    world.buy(world.accounts[1])
    world.buy(world.accounts[2])
    # From the block after the cursor: the command indexes from scratch.
    first = json.loads(fleet(env, "chain", "reindex", "--from-block", "0", "--json"))
    assert (first["logs_indexed"], first["actions_staged"]) == (3, 2)  # a round, two tickets
    assert first["cursor"] == world.client.block_number()
    again = json.loads(fleet(env, "chain", "reindex", "--from-block", "0", "--json"))
    assert (again["logs_removed"], again["logs_indexed"], again["staged"]) == (3, 3, [])
    assert db.execute("SELECT count(*) FROM outbox_events").fetchone() == (2,)
