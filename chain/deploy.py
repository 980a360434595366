"""`fleet chain deploy`: deploy the reference contracts and record their addresses.

Used by `make run` (local anvil) and by tests; production points the fleet at contracts
deployed elsewhere through `CHAIN_LOTTERY_ADDRESS` / `CHAIN_BADGE_ADDRESS` or this table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from .abi import BADGE, COORDINATOR, LOTTERY, deploy_data, load_artifact
from .address import to_checksum_address
from .client import ChainClient
from .errors import TxNotMined
from .fees import GWEI, initial_fees
from .registry import Deployment

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

log = structlog.get_logger("jobfleet.chain.deploy")


@dataclass(frozen=True)
class LotteryConfig:
    ticket_price_wei: int = 10**15  # 0.001 ether
    round_duration_s: int = 3_600
    min_players: int = 2


def deploy_contract(
    client: ChainClient,
    deployer: LocalAccount,
    name: str,
    *args: Any,
    max_fee: int = 300 * GWEI,
    timeout_s: float = 60.0,
) -> Deployment:
    data = deploy_data(name, *args)
    gas = client.estimate_gas({"from": deployer.address, "data": data}) * 12 // 10
    fees = initial_fees(client.base_fee(), priority_fee=GWEI, cap=max_fee)
    signed = deployer.sign_transaction(
        {
            "type": 2,
            "chainId": client.chain_id(),
            "nonce": client.nonce(deployer.address, "pending"),
            "data": data,
            "value": 0,
            "gas": gas,
            **fees.as_tx_fields(),
        }
    )
    tx_hash = client.send_raw(bytes(signed.raw_transaction))
    deadline = time.monotonic() + timeout_s
    while (receipt := client.receipt(tx_hash)) is None:
        if time.monotonic() > deadline:
            raise TxNotMined(f"deployment of {name} ({tx_hash}) unmined after {timeout_s:.0f}s")
        time.sleep(0.05)
    if int(receipt["status"], 16) != 1:
        raise RuntimeError(f"deployment of {name} reverted ({tx_hash})")
    address = to_checksum_address(receipt["contractAddress"])
    log.info("contract.deployed", contract=name, address=address, tx_hash=tx_hash)
    return Deployment(
        name=name,
        address=address,
        tx_hash=tx_hash,
        block_number=int(receipt["blockNumber"], 16),
        deployer=deployer.address,
        artifact_sha256=load_artifact(name).sha256,
    )


def deploy_reference(
    client: ChainClient,
    deployer: LocalAccount,
    *,
    operator: str,
    config: LotteryConfig = LotteryConfig(),
) -> dict[str, Deployment]:
    """Coordinator, lottery (owned by `deployer`) and badge NFT (minted by `operator`)."""
    coordinator = deploy_contract(client, deployer, COORDINATOR)
    lottery = deploy_contract(
        client,
        deployer,
        LOTTERY,
        coordinator.address,
        config.ticket_price_wei,
        config.round_duration_s,
        config.min_players,
    )
    badge = deploy_contract(client, deployer, BADGE, to_checksum_address(operator))
    return {d.name: d for d in (coordinator, lottery, badge)}


def add_signers(
    client: ChainClient, owner: LocalAccount, badge: str, count: int, *, fund_wei: int = 10**18
) -> list[LocalAccount]:
    """`count` new operator signers of the badge contract: fresh keys, each funded with
    `fund_wei` by `owner` (the badge's owner) and allowed to mint (`setOperator`). The caller
    stores their keys sealed (SIGNER wallets): the operator's pool of signers."""
    from eth_account import Account

    from .abi import encode_call
    from .devnet import transact

    signers: list[LocalAccount] = []
    for _ in range(count):
        signer: LocalAccount = Account.create()
        transact(client, owner, signer.address, b"", value=fund_wei)
        transact(client, owner, badge, encode_call(BADGE, "setOperator", signer.address, True))
        log.info("signer.added", address=signer.address, badge=badge)
        signers.append(signer)
    return signers
