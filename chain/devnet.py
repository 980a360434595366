"""A local EVM node for development and tests: anvil from the npm package `@foundry-rs/anvil`.

`npm ci` at the repository root installs the binary (shipped inside the registry package, no
download at run time). Anvil's default accounts come from its public development mnemonic:
their keys are well known, hold test ether only, and are never printed (anvil runs `--quiet`).
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    stop_any,
    wait_fixed,
)
from tenacity.stop import stop_base

from .client import ChainClient
from .errors import RpcUnavailable

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

ROOT = Path(__file__).resolve().parents[1]
#: Anvil's (and Hardhat's) public development mnemonic: test accounts only, never real funds.
DEV_MNEMONIC = "test test test test test test test test test test test junk"
_PLATFORMS = {
    ("Linux", "x86_64"): "linux-amd64",
    ("Linux", "aarch64"): "linux-arm64",
    ("Darwin", "arm64"): "darwin-arm64",
}


def anvil_binary() -> str:
    """`$ANVIL_BIN`, else the platform binary under node_modules, else `anvil` on PATH."""
    if env := os.environ.get("ANVIL_BIN"):
        return env
    suffix = _PLATFORMS.get((platform.system(), platform.machine()))
    if suffix:
        candidate = ROOT / "node_modules" / "@foundry-rs" / f"anvil-{suffix}" / "bin" / "anvil"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("anvil")
    if found:
        return found
    raise FileNotFoundError(
        "anvil not found: run `npm ci` at the repository root (or set ANVIL_BIN)"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Anvil:
    process: subprocess.Popen[bytes]
    url: str
    chain_id: int

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_anvil(
    *,
    port: int | None = None,
    chain_id: int = 31337,
    accounts: int = 10,
    extra: tuple[str, ...] = (),
    timeout_s: float = 15.0,
) -> Anvil:
    port = port or free_port()
    cmd = [
        anvil_binary(),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--chain-id", str(chain_id),
        "--accounts", str(accounts),
        "--quiet",
        *extra,
    ]  # fmt: skip
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    client = ChainClient.connect(url, timeout_s=2)

    class Exited(stop_base):
        def __call__(self, retry_state: RetryCallState) -> bool:
            return process.poll() is not None

    try:
        for attempt in Retrying(
            retry=retry_if_exception_type(RpcUnavailable),
            stop=stop_any(stop_after_delay(timeout_s), Exited()),
            wait=wait_fixed(0.05),
        ):
            with attempt:
                client.chain_id()
    except RetryError:
        process.kill()
        raise RuntimeError(f"anvil did not start on port {port}") from None
    return Anvil(process, url, chain_id)


#: Chain ids of local development nodes (anvil and Hardhat use 31337; Ganache 1337).
DEV_CHAIN_IDS = frozenset({31337, 1337})
#: `web3_clientVersion` prefixes of development nodes.
DEV_CLIENTS = ("anvil", "hardhat", "ganache")


def dev_chain(client: ChainClient) -> tuple[bool, str]:
    """Is the node a local development chain (chain id 31337, or anvil/Hardhat/Ganache)?

    `fleet chain deploy --dev` makes a public key (anvil's first dev account) the operator:
    on any other chain its funds and the contracts it owns are anyone's.
    """
    chain_id = client.chain_id()
    try:
        version = str(client.request("web3_clientVersion", []) or "")
    except Exception:  # a node without the method: the chain id alone decides
        version = ""
    if chain_id in DEV_CHAIN_IDS or version.lower().startswith(DEV_CLIENTS):
        return True, f"chain {chain_id}, {version or 'unknown client'}"
    return False, f"chain {chain_id}, {version or 'unknown client'}"


def dev_accounts(count: int = 10) -> list[LocalAccount]:
    """Anvil's default accounts (index 0 is the usual deployer/operator)."""
    from eth_account import Account

    Account.enable_unaudited_hdwallet_features()
    return [
        Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}")
        for i in range(count)
    ]


def transact(
    client: ChainClient,
    account: LocalAccount,
    to: str,
    data: bytes,
    *,
    value: int = 0,
    timeout_s: float = 10.0,
) -> dict[str, Any]:
    """Sign, send and wait for one transaction (dev tooling and tests; no journal, no lock)."""
    from .fees import GWEI, initial_fees

    call = {"from": account.address, "to": to, "data": data, "value": value}
    gas = client.estimate_gas(call) * 12 // 10
    fees = initial_fees(client.base_fee(), priority_fee=GWEI, cap=1_000 * GWEI)
    tx: dict[str, Any] = {
        "type": 2,
        "chainId": client.chain_id(),
        "nonce": client.nonce(account.address, "pending"),
        "to": to,
        "data": data,
        "value": value,
        "gas": gas,
        **fees.as_tx_fields(),
    }
    signed = account.sign_transaction(tx)
    tx_hash = client.send_raw(bytes(signed.raw_transaction))
    deadline = time.monotonic() + timeout_s
    while (receipt := client.receipt(tx_hash)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{tx_hash} unmined after {timeout_s}s")
        time.sleep(0.02)
    return receipt


# -- anvil's own RPC methods (development node only) --


def set_automine(client: ChainClient, enabled: bool) -> None:
    client.request("evm_setAutomine", [enabled])


def mine(client: ChainClient, blocks: int = 1) -> None:
    client.request("anvil_mine", [hex(blocks)])


def increase_time(client: ChainClient, seconds: int) -> None:
    client.request("evm_increaseTime", [seconds])
    client.request("evm_mine", [])


def drop_transaction(client: ChainClient, tx_hash: str) -> None:
    client.request("anvil_dropTransaction", [tx_hash])


def snapshot(client: ChainClient) -> str:
    return str(client.request("evm_snapshot", []))


def revert(client: ChainClient, snapshot_id: str) -> bool:
    return bool(client.request("evm_revert", [snapshot_id]))
