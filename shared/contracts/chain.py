"""Payloads of the chain-actions queue. Their job id is `{TYPE}-{round_id}-{address}`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Address, Contract, Payload


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


CHAIN_MINT_BADGE = Contract[MintBadgeV1]("chain:mint_badge", (MintBadgeV1,))
CHAIN_CLAIM_PRIZE = Contract[ClaimPrizeV1]("chain:claim_prize", (ClaimPrizeV1,))
CHAIN_CLAIM_REFUND = Contract[ClaimRefundV1]("chain:claim_refund", (ClaimRefundV1,))
