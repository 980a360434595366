"""Payloads of the chain-actions queue.

v2 names the deployment a round belongs to (`chain_id`, and `contract`: the lottery), so two
deployments or two chains never share a job id: `{TYPE}-{chain_id}-{contract}-{round_id}-{address}`
(contract and address lower-case hex; DESIGN §2). A v1 message (queued before v2) is upgraded with
`chain_id` 0 and the zero address, "unscoped": it keeps its v1 id `{TYPE}-{round_id}-{address}`
and the worker resolves it to the chain and lottery it is configured with.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from chain.address import to_checksum_address
from shared.contracts.base import Contract, DefaultPattern, Payload

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


def _checksum_address(value: str) -> str:
    if not _ADDRESS.match(value):
        raise ValueError("must be a 0x-prefixed 20-byte hex address")
    return to_checksum_address(value)


#: An EVM address, normalised to its EIP-55 checksum form.
Address = Annotated[str, AfterValidator(_checksum_address), DefaultPattern(_ADDRESS.pattern)]

#: `contract` of an upgraded v1 payload (with `chain_id` 0): the worker's configured lottery.
UNSCOPED_CONTRACT = "0x" + "00" * 20


class MintBadgeV1(Payload):
    v: Literal[1] = 1
    round_id: int = Field(ge=0)
    player: Address


class ClaimPrizeV1(Payload):
    v: Literal[1] = 1
    round_id: int = Field(ge=0)
    winner: Address


class ClaimRefundV1(Payload):
    v: Literal[1] = 1
    round_id: int = Field(ge=0)
    payer: Address


class MintBadgeV2(Payload):
    v: Literal[2] = 2
    chain_id: int = Field(ge=0, description="EIP-155 chain id; 0 only for an upgraded v1")
    contract: Address = Field(description="The lottery contract the round belongs to")
    round_id: int = Field(ge=0)
    player: Address


class ClaimPrizeV2(Payload):
    v: Literal[2] = 2
    chain_id: int = Field(ge=0, description="EIP-155 chain id; 0 only for an upgraded v1")
    contract: Address = Field(description="The lottery contract the round belongs to")
    round_id: int = Field(ge=0)
    winner: Address


class ClaimRefundV2(Payload):
    v: Literal[2] = 2
    chain_id: int = Field(ge=0, description="EIP-155 chain id; 0 only for an upgraded v1")
    contract: Address = Field(description="The lottery contract the round belongs to")
    round_id: int = Field(ge=0)
    payer: Address


def _unscoped(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "v": 2, "chain_id": 0, "contract": UNSCOPED_CONTRACT}


CHAIN_MINT_BADGE = Contract[MintBadgeV2](
    "chain:mint_badge", (MintBadgeV1, MintBadgeV2), upgrades={1: _unscoped}
)
CHAIN_CLAIM_PRIZE = Contract[ClaimPrizeV2](
    "chain:claim_prize", (ClaimPrizeV1, ClaimPrizeV2), upgrades={1: _unscoped}
)
CHAIN_CLAIM_REFUND = Contract[ClaimRefundV2](
    "chain:claim_refund", (ClaimRefundV1, ClaimRefundV2), upgrades={1: _unscoped}
)
