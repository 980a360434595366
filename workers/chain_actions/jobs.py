"""The chain actions' jobs (DESIGN §2). Producers (the scheduler's projection, a product API)
send them through `shared.jobs.catalog` (`catalog.CHAIN_MINT_BADGE`,
`catalog.get("chain:mint_badge")`); the worker binds its handlers to them."""

from __future__ import annotations

from typing import Any

from shared.jobs.spec import JobSpec

from . import contracts
from .job_ids import ChainJobId

CHAIN_MINT_BADGE = JobSpec(
    contracts.CHAIN_MINT_BADGE,
    queue="chain-actions",
    entity_type="lottery_round",
    custom_id=ChainJobId("MINT_BADGE", "player"),
)
CHAIN_CLAIM_PRIZE = JobSpec(
    contracts.CHAIN_CLAIM_PRIZE,
    queue="chain-actions",
    entity_type="lottery_round",
    custom_id=ChainJobId("CLAIM_PRIZE", "winner"),
)
CHAIN_CLAIM_REFUND = JobSpec(
    contracts.CHAIN_CLAIM_REFUND,
    queue="chain-actions",
    entity_type="lottery_round",
    custom_id=ChainJobId("CLAIM_REFUND", "payer"),
)

JOBS: tuple[JobSpec[Any], ...] = (CHAIN_MINT_BADGE, CHAIN_CLAIM_PRIZE, CHAIN_CLAIM_REFUND)
