"""Actors of the chain_actions worker: parse (done by `handler`), call the domain, map errors."""

from __future__ import annotations

from functools import partial
from typing import Any

from chain.errors import RpcUnavailable
from shared.jobs import catalog
from shared.jobs.context import JobContext
from shared.jobs.handler import Handler, bind_handlers
from shared.jobs.spec import JobSpec
from shared.runtime import get_runtime
from workers.chain_actions.contracts import ClaimPrizeV2, ClaimRefundV2, MintBadgeV2

from . import wiring
from .client import CLAIM_PRIZE, CLAIM_REFUND, MINT_BADGE
from .domain import Action, perform


def mint_badge(payload: MintBadgeV2, job: JobContext) -> dict[str, Any]:
    action = Action(
        MINT_BADGE, job.job_id, payload.round_id, payload.player, payload.chain_id, payload.contract
    )
    return _run(action, job)


def claim_prize(payload: ClaimPrizeV2, job: JobContext) -> dict[str, Any]:
    action = Action(
        CLAIM_PRIZE,
        job.job_id,
        payload.round_id,
        payload.winner,
        payload.chain_id,
        payload.contract,
    )
    return _run(action, job)


def claim_refund(payload: ClaimRefundV2, job: JobContext) -> dict[str, Any]:
    action = Action(
        CLAIM_REFUND,
        job.job_id,
        payload.round_id,
        payload.payer,
        payload.chain_id,
        payload.contract,
    )
    return _run(action, job)


#: By job declaration; `app` binds them to the worker's broker (importing this boots nothing).
HANDLERS: dict[JobSpec[Any], Handler[Any]] = {
    catalog.CHAIN_MINT_BADGE: mint_badge,
    catalog.CHAIN_CLAIM_PRIZE: claim_prize,
    catalog.CHAIN_CLAIM_REFUND: claim_refund,
}
#: Bind them to a broker (default: the process's global one): `app`, or a test's own.
bind = partial(bind_handlers, HANDLERS)


def _run(action: Action, job: JobContext) -> dict[str, Any]:
    """`perform`, with an unreachable node mapped to "retry later" (no attempt spent) for up to
    the outage window; the collaborators are built inside, as building asks the node too."""
    runtime = get_runtime()
    outages = wiring.outages(runtime)
    try:
        # A cancel that arrived while the action waited (signer lock, outage) stops it before
        # anything is signed: `progress` raises `JobCanceled` when one was asked.
        result = perform(
            action, wiring.for_runtime(runtime), before_send=lambda: job.progress(0, 1)
        )
    except RpcUnavailable as exc:
        raise outages.failed(job.job_id, exc) from None
    except BaseException:
        outages.clear(job.job_id)
        raise
    outages.clear(job.job_id)
    return result
