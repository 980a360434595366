"""Actors of the chain_actions worker: parse (done by `handler`), call the domain, map errors."""

from __future__ import annotations

from typing import Any

from shared.contracts.chain import ClaimPrizeV2, ClaimRefundV2, MintBadgeV2
from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import handler
from shared.runtime import get_runtime

from . import services
from .domain import CLAIM_PRIZE, CLAIM_REFUND, MINT_BADGE, Action, perform


@handler(catalog.CHAIN_MINT_BADGE)
def mint_badge(payload: MintBadgeV2, job: JobContext) -> dict[str, Any]:
    action = Action(
        MINT_BADGE, job.job_id, payload.round_id, payload.player, payload.chain_id, payload.contract
    )
    return perform(action, services.for_runtime(get_runtime()))


@handler(catalog.CHAIN_CLAIM_PRIZE)
def claim_prize(payload: ClaimPrizeV2, job: JobContext) -> dict[str, Any]:
    action = Action(
        CLAIM_PRIZE,
        job.job_id,
        payload.round_id,
        payload.winner,
        payload.chain_id,
        payload.contract,
    )
    return perform(action, services.for_runtime(get_runtime()))


@handler(catalog.CHAIN_CLAIM_REFUND)
def claim_refund(payload: ClaimRefundV2, job: JobContext) -> dict[str, Any]:
    action = Action(
        CLAIM_REFUND,
        job.job_id,
        payload.round_id,
        payload.payer,
        payload.chain_id,
        payload.contract,
    )
    return perform(action, services.for_runtime(get_runtime()))
