"""Chain fixtures: one anvil per test session (random port and chain id), the reference contracts
deployed once and restored from an EVM snapshot before each test, wallets sealed under a test KEK.

Shared by the folders that test against the chain (tests/workers/chain_actions,
tests/integration/chain, tests/scheduler, tests/acceptance): each one's conftest.py imports the
fixtures it uses from here. Pytest makes a fixture of each import, so the session's anvil and
deployment are kept here, once per test process, whichever folder asks first.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from chain import devnet
from chain.abi import BADGE, COORDINATOR, LOTTERY
from chain.client import ChainClient
from chain.deploy import LotteryConfig, deploy_reference
from chain.registry import Deployment, record_deployment
from chain.settings import ChainSettings
from chain.wallets import EMBEDDED, OPERATOR, store_wallet
from shared.config import Settings
from shared.runtime import Runtime
from tests.support.chain.world import KEK_A, MIN_PLAYERS, ROUND_S, TICKET, World, keyring
from tests.support.env import test_env
from tests.support.procs import ProcessGroup

#: This process's anvil and deployment ("anvil", "deployed"), shared by every conftest's copy.
_SESSION: dict[str, Any] = {}


@pytest.fixture(scope="session")
def anvil() -> Iterator[devnet.Anvil]:
    if "anvil" in _SESSION:  # started by another folder's copy of this fixture
        yield _SESSION["anvil"]
        return
    node = _SESSION["anvil"] = devnet.start_anvil(chain_id=random.randint(40_000, 60_000))
    yield node
    _SESSION.clear()
    node.stop()


@dataclass
class Deployed:
    contracts: dict[str, str]
    accounts: list[Any]
    snapshot: str  # an anvil snapshot id; reverting to it consumes it


@pytest.fixture(scope="session")
def deployed(anvil: devnet.Anvil) -> Deployed:
    if "deployed" not in _SESSION:
        _SESSION["deployed"] = deploy(anvil)
    shared: Deployed = _SESSION["deployed"]
    return shared


def deploy(anvil: devnet.Anvil) -> Deployed:
    client = ChainClient.connect(anvil.url)
    accounts = devnet.dev_accounts(10)
    config = LotteryConfig(
        ticket_price_wei=TICKET, round_duration_s=ROUND_S, min_players=MIN_PLAYERS
    )
    contracts = deploy_reference(client, accounts[0], operator=accounts[0].address, config=config)
    return Deployed(
        {name: d.address for name, d in contracts.items()}, accounts, devnet.snapshot(client)
    )


def chain_env(anvil: devnet.Anvil, **extra: str) -> dict[str, str]:
    """Environment of this session's chain-actions processes (short timeouts, fast retries)."""
    env = {
        **test_env(),
        "CHAIN_RPC_URL": anvil.url,
        "CHAIN_ID": str(anvil.chain_id),
        "CHAIN_KEKS": json.dumps({"a": KEK_A}),
        "CHAIN_KEK_ID": "a",
        "CHAIN_SIGNER_LOCK_TTL_MS": "2000",
        "CHAIN_RPC_TIMEOUT_S": "2",
        # Anvil mines on demand here: a receipt settles at once unless a test asks for depth.
        "INDEXER_CONFIRMATIONS": "0",
        "RETRIES": json.dumps(
            {"chain-actions": {"max_attempts": 5, "min_backoff_ms": 300, "max_backoff_ms": 1000}}
        ),
    }
    env.update(extra)
    return env


@pytest.fixture
def chain_settings(anvil: devnet.Anvil) -> ChainSettings:
    """The EVM settings of in-process collaborators (those of `chain_env`)."""
    return ChainSettings(
        rpc_url=anvil.url,
        chain_id=anvil.chain_id,
        keks={"a": SecretStr(KEK_A)},
        kek_id="a",
        signer_lock_ttl_ms=2_000,
        rpc_timeout_s=2.0,
        confirmations=0,
        # Tests call the domain in-process and want its outcome: await it in the call (the
        # worker's default hands the job back right after the broadcast).
        await_in_worker_s=10.0,
    )


@pytest.fixture
def world(runtime: Runtime, anvil: devnet.Anvil, deployed: Deployed) -> Iterator[World]:
    """The chain back at the post-deploy snapshot; the clean database knows contracts and wallets.

    Wallets: accounts[0] is the operator; accounts[1..6] are embedded wallets with keys;
    accounts[7] is a keyless embedded wallet; accounts[8..9] are unknown to the fleet.
    """
    client = ChainClient.connect(anvil.url)
    devnet.set_automine(client, True)
    assert devnet.revert(client, deployed.snapshot)
    deployed.snapshot = devnet.snapshot(client)
    accounts, ring = deployed.accounts, keyring()
    with runtime.pool.connection() as conn:
        for name in (COORDINATOR, LOTTERY, BADGE):
            record_deployment(conn, anvil.chain_id, Deployment(name, deployed.contracts[name]))
        store_wallet(conn, ring, bytes(accounts[0].key), kind=OPERATOR)
        for account in accounts[1:7]:
            store_wallet(conn, ring, bytes(account.key), kind=EMBEDDED)
        store_wallet(conn, ring, None, address=accounts[7].address, kind=EMBEDDED)
    yield World(client, accounts, deployed.contracts)
    devnet.set_automine(client, True)


@pytest.fixture
def chain_runtime(settings: Settings, world: World) -> Iterator[Runtime]:
    """A runtime of its own (its own pool), for the domain's collaborators."""
    rt = Runtime(settings)
    yield rt
    rt.close()


@pytest.fixture
def deps(chain_runtime: Runtime, chain_settings: ChainSettings) -> Any:
    from workers.chain_actions import wiring

    return wiring.build(chain_runtime, chain_settings)


class Workers(ProcessGroup):
    """`dramatiq workers.chain_actions.app` processes of this session; logs kept for inspection."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        super().__init__(tmp, env, name="worker")

    def start(self, *, threads: int = 2, **extra: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "dramatiq", "workers.chain_actions.app", "--processes", "1"]
        return self.spawn([*argv, "--threads", str(threads)], **extra)


@pytest.fixture
def workers(tmp_path: Path, anvil: devnet.Anvil, world: World) -> Iterator[Workers]:
    group = Workers(tmp_path, chain_env(anvil))
    yield group
    group.stop_all()
