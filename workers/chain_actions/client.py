"""The chain-actions domain's producer API: ask for a lottery's follow-up transaction.

    from workers.chain_actions.client import mint_badge, stage

    with sessions() as session, session.begin():
        staged = stage(session, mint_badge(chain_id=31337, contract=lottery, round_id=3,
                                           player=address))

An action names its deployment (`chain_id` and the lottery `contract`), the round and the
address it is for; its job id is the scoped one of DESIGN §2
(`{TYPE}-{chain_id}-{contract}-{round_id}-{address}`), so asking twice for one action is one job.
`stage` writes the job to the outbox in the caller's transaction (no commit, no job): the
indexer stages the actions its projections ask for this way. `send` (and `send_mint_badge`,
`send_claim_prize`, `send_claim_refund`) sends it at once through the process's runtime. The
payload is checked when the action is built (`PayloadError` naming the field). The worker checks
it again against the chain and the indexer's tables before signing anything (`domain.py`).

Importing this module boots nothing (no broker, no logging, no runtime, no web3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from shared import outbox
from shared.contracts import SYSTEM_ORG
from shared.contracts.base import Payload
from shared.jobs import catalog
from shared.jobs.spec import JobSpec

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from shared.jobs.send import SendResult
    from shared.runtime import Runtime

MINT_BADGE, CLAIM_PRIZE, CLAIM_REFUND = "MINT_BADGE", "CLAIM_PRIZE", "CLAIM_REFUND"

#: Each action's job and the payload field of the address it is for.
_JOBS: dict[str, tuple[JobSpec[Any], str]] = {
    MINT_BADGE: (catalog.CHAIN_MINT_BADGE, "player"),
    CLAIM_PRIZE: (catalog.CHAIN_CLAIM_PRIZE, "winner"),
    CLAIM_REFUND: (catalog.CHAIN_CLAIM_REFUND, "payer"),
}


@dataclass(frozen=True)
class ChainAction:
    """A validated request for one action: its job and payload."""

    spec: JobSpec[Any]
    payload: Payload

    @property
    def job_name(self) -> str:
        return self.spec.name

    @property
    def job_id(self) -> str:
        return self.spec.job_id(self.payload)


def action(
    kind: str,
    *,
    chain_id: int,
    contract: str,
    round_id: int,
    address: str,
    org_id: UUID | str = SYSTEM_ORG,
) -> ChainAction:
    """`kind` (MINT_BADGE, CLAIM_PRIZE, CLAIM_REFUND) of round `round_id` of the lottery
    `contract` on chain `chain_id`, for `address` (the player, winner or payer)."""
    try:
        spec, field = _JOBS[kind]
    except KeyError:
        raise ValueError(f"unknown chain action {kind!r}") from None
    payload = spec.build(
        {
            "org_id": org_id,
            "chain_id": chain_id,
            "contract": contract,
            "round_id": round_id,
            field: address,
        }
    )
    return ChainAction(spec, payload)


def mint_badge(*, chain_id: int, contract: str, round_id: int, player: str) -> ChainAction:
    return action(
        MINT_BADGE, chain_id=chain_id, contract=contract, round_id=round_id, address=player
    )


def claim_prize(*, chain_id: int, contract: str, round_id: int, winner: str) -> ChainAction:
    return action(
        CLAIM_PRIZE, chain_id=chain_id, contract=contract, round_id=round_id, address=winner
    )


def claim_refund(*, chain_id: int, contract: str, round_id: int, payer: str) -> ChainAction:
    return action(
        CLAIM_REFUND, chain_id=chain_id, contract=contract, round_id=round_id, address=payer
    )


def stage(session: Session, request: ChainAction, *, event_type: str | None = None) -> UUID:
    """Write the action's job to the outbox in the caller's transaction; its outbox event id."""
    event = outbox.enqueue(session, request.spec, request.payload, event_type=event_type)
    return event.id


def send(request: ChainAction, *, runtime: Runtime | None = None) -> SendResult:
    """Send the action's job now (`duplicate=True` when that action is already queued or done)."""
    if runtime is None:
        from shared.runtime import get_runtime

        runtime = get_runtime()
    return runtime.sender.send(request.spec, request.payload)


def send_mint_badge(
    *, chain_id: int, contract: str, round_id: int, player: str, runtime: Runtime | None = None
) -> SendResult:
    request = mint_badge(chain_id=chain_id, contract=contract, round_id=round_id, player=player)
    return send(request, runtime=runtime)


def send_claim_prize(
    *, chain_id: int, contract: str, round_id: int, winner: str, runtime: Runtime | None = None
) -> SendResult:
    request = claim_prize(chain_id=chain_id, contract=contract, round_id=round_id, winner=winner)
    return send(request, runtime=runtime)


def send_claim_refund(
    *, chain_id: int, contract: str, round_id: int, payer: str, runtime: Runtime | None = None
) -> SendResult:
    request = claim_refund(chain_id=chain_id, contract=contract, round_id=round_id, payer=payer)
    return send(request, runtime=runtime)
