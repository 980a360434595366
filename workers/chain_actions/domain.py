"""The three chain actions of the lottery and their outcome rules (issue 4, seed 001).

| action       | signer                    | call                                  |
|--------------|---------------------------|---------------------------------------|
| MINT_BADGE   | the operator wallet       | BlockLuckyPOAP.mintBadge(player, round) |
| CLAIM_PRIZE  | the winner's embedded wallet | BlockLucky.claimPrize(round)       |
| CLAIM_REFUND | the payer's embedded wallet  | BlockLucky.claimRefund(round)      |

Outcomes: confirmed → success; already done (`PrizeAlreadyClaimed`, `NothingToRefund`,
`BadgeAlreadyMinted`) → success; definitive (`NotWinner`, `RoundNotCompleted`,
`RoundNotCancelled`, `ZeroAddressNotAllowed`) → `PermanentError` whose code is the error name;
unknown wallet or no stored key → success doing nothing, logged with the reason; RPC down or
timeouts → retried later without spending attempts, for up to the outage window (actors).
Payloads are not trusted: a badge needs a ticket of the player in that round in the indexer's
projections (`NOT_A_PLAYER`), a claim a player's (embedded) wallet, never the operator's
(`NOT_A_PLAYER_WALLET`), the lottery a deployment known on this chain. Any other revert (a paused
contract, a misconfigured operator) is retried too: state can change, and a reverting preflight
costs no gas.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import structlog

from chain import journal as states
from chain.abi import BADGE, LOTTERY, Revert, encode_call
from chain.address import to_checksum_address
from chain.errors import ChainError, WalletKeyUnreadable
from chain.journal import ActionJournal, ConnectionFactory
from chain.keys import Keyring
from chain.transactions import TxOutcome, TxRequest, TxSender
from chain.wallets import EMBEDDED, load_signer, pool_signer, wallet_info
from shared.errors import PermanentError
from workers.chain_actions.job_ids import chain_job_id

from .client import CLAIM_PRIZE, CLAIM_REFUND, MINT_BADGE

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

log = structlog.get_logger("jobfleet.chain_actions")

ALREADY_DONE = frozenset({"PrizeAlreadyClaimed", "NothingToRefund", "BadgeAlreadyMinted"})
DEFINITIVE = frozenset(
    {"NotWinner", "RoundNotCompleted", "RoundNotCancelled", "ZeroAddressNotAllowed"}
)


class ContractReverted(ChainError):
    """The contract rejected the call with an error not known to be definitive; retried."""

    code = "CONTRACT_REVERTED"


@dataclass(frozen=True)
class Action:
    type: str
    job_id: str
    round_id: int
    address: str  # the player, winner or payer
    #: The deployment the round belongs to; 0 / None for a v1 payload (the worker's own).
    chain_id: int = 0
    lottery: str | None = None

    @property
    def contract_name(self) -> str:
        return BADGE if self.type == MINT_BADGE else LOTTERY

    def calldata(self) -> bytes:
        if self.type == MINT_BADGE:
            return encode_call(BADGE, "mintBadge", self.address, self.round_id)
        if self.type == CLAIM_PRIZE:
            return encode_call(LOTTERY, "claimPrize", self.round_id)
        if self.type == CLAIM_REFUND:
            return encode_call(LOTTERY, "claimRefund", self.round_id)
        raise ValueError(f"unknown chain action {self.type!r}")


@dataclass
class Collaborators:
    sender: TxSender
    journal: ActionJournal
    connect: ConnectionFactory  # database connections (wallets)
    keyring: Keyring
    chain_id: int
    contract_address: Callable[[str], str]  # contract name -> current address on this chain
    #: Is this address a lottery whose rounds the indexer projected (an earlier deployment)?
    known_lottery: Callable[[str], bool] = lambda address: False
    #: (lottery, round, player) -> does the indexer know a ticket of the player in that round?
    holds_ticket: Callable[[str, int, str], bool] = lambda lottery, round_id, player: False
    #: How long a delivery awaits its transaction before handing the job back (0: one look;
    #: None: until the receipt timeout): `CHAIN_AWAIT_IN_WORKER_S`.
    wait_s: float | None = None


def perform(
    action: Action, deps: Collaborators, *, before_send: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Send the action's transaction once; `before_send` (the job's cancel check) runs right
    before a new transaction is signed."""
    lottery = _lottery(action, deps)
    if action.chain_id == 0:
        # A v1 message keeps its v1 job id but is journaled under the scoped key, as a v2
        # message for the same intent would be: one journal row per intent.
        key = chain_job_id(action.type, deps.chain_id, lottery, action.round_id, action.address)
        action = replace(action, job_id=key, chain_id=deps.chain_id, lottery=lottery)
    if action.type == MINT_BADGE and not deps.holds_ticket(
        lottery, action.round_id, action.address
    ):
        # The payload is not trusted: a badge is for a player the indexer saw buy a ticket.
        raise PermanentError(
            f"{action.address} holds no ticket of round {action.round_id} of {lottery}"
            " (lottery_tickets)",
            code="NOT_A_PLAYER",
        )
    contract = lottery if action.contract_name == LOTTERY else deps.contract_address(BADGE)
    row = deps.journal.begin(
        action.job_id,
        type=action.type,
        round_id=action.round_id,
        address=action.address,
        chain_id=deps.chain_id,
        contract=contract,
    )
    if row.status in (states.CONFIRMED, states.ALREADY_DONE, states.SKIPPED):
        # Finished by an earlier delivery whose run was not marked done: nothing to send.
        return {
            "outcome": row.status.lower(),
            "tx_hash": row.tx_hash,
            "error": row.error_code,
            "recorded": True,
        }
    try:
        signer, reason = _signer(action, deps, pinned=row.signer)
    except WalletKeyUnreadable as exc:
        deps.journal.finish(action.job_id, states.FAILED, error_code=exc.code, error=str(exc))
        raise
    if signer is None:
        deps.journal.finish(action.job_id, states.SKIPPED, error_code="NO_SIGNER", error=reason)
        log.warning(
            "chain_action.skipped", action=action.type, address=action.address, reason=reason
        )
        return {"outcome": "skipped", "reason": reason}
    request = TxRequest(action.job_id, contract, action.calldata(), before_send=before_send)
    outcome = deps.sender.execute(signer, request, wait_s=deps.wait_s)
    return _conclude(action, deps, signer.address, outcome)


def _lottery(action: Action, deps: Collaborators) -> str:
    """The lottery the payload names, checked against this worker's chain and deployments."""
    current = deps.contract_address(LOTTERY)
    if action.chain_id == 0 or action.lottery is None:  # v1: unscoped, the configured lottery
        return current
    if action.chain_id != deps.chain_id:
        raise PermanentError(
            f"{action.type} is for chain {action.chain_id}; this worker serves {deps.chain_id}",
            code="WRONG_CHAIN",
        )
    lottery = to_checksum_address(action.lottery)
    if lottery != current and not deps.known_lottery(lottery):
        raise PermanentError(
            f"{action.type}: {lottery} is no lottery deployment known on chain {deps.chain_id}",
            code="UNKNOWN_CONTRACT",
        )
    return lottery


def _signer(
    action: Action, deps: Collaborators, *, pinned: str | None = None
) -> tuple[LocalAccount | None, str]:
    with deps.connect() as conn:
        if action.type == MINT_BADGE:
            # The operator's pool of signers (OPERATOR and SIGNER wallets), each with its own
            # nonce lane and lock; an action keeps the signer its journal row names.
            operator = pool_signer(conn, deps.keyring, action.job_id, pinned)
            return operator, "" if operator else "no operator wallet with a stored key"
        info = wallet_info(conn, action.address)
        if info is None:
            return None, f"unknown wallet {action.address}"
        if info.kind != EMBEDDED:
            # Claims are signed by the player's own wallet; the operator's key never claims.
            raise PermanentError(
                f"{action.type} for {action.address}: a {info.kind.lower()} wallet, not a"
                " player's; claims are signed by player wallets only",
                code="NOT_A_PLAYER_WALLET",
            )
        if not info.has_key:
            return None, f"wallet {action.address} has no stored key"
        return load_signer(conn, deps.keyring, action.address), ""


def _conclude(
    action: Action, deps: Collaborators, signer: str, outcome: TxOutcome
) -> dict[str, Any]:
    if outcome.recorded is not None:
        # Settled by another delivery while this one waited for the signer: nothing was sent.
        return {"outcome": outcome.recorded.lower(), "tx_hash": outcome.tx_hash, "recorded": True}
    common: dict[str, Any] = {
        "signer": signer,
        "tx_hash": outcome.tx_hash,
        "gas_used": outcome.gas_used,
        "block_number": outcome.block_number,
    }
    if outcome.confirmed:
        deps.journal.finish(action.job_id, states.CONFIRMED, **common)
        log.info(
            "chain_action.confirmed",
            action=action.type,
            tx_hash=outcome.tx_hash,
            reconciled=outcome.reconciled,
        )
        return {"outcome": "confirmed", "reconciled": outcome.reconciled, **common}
    revert = outcome.revert or Revert("UNKNOWN_REVERT")
    if revert.name in ALREADY_DONE:
        deps.journal.finish(
            action.job_id,
            states.ALREADY_DONE,
            error_code=revert.name,
            error=revert.describe(),
            **common,
        )
        log.info("chain_action.already_done", action=action.type, error=revert.name)
        return {"outcome": "already_done", "error": revert.name, **common}
    if revert.name in DEFINITIVE:
        deps.journal.finish(
            action.job_id, states.FAILED, error_code=revert.name, error=revert.describe(), **common
        )
        raise PermanentError(
            f"{action.type} round {action.round_id}: {revert.describe()}", code=revert.name
        )
    deps.journal.finish(
        action.job_id, states.PENDING, error_code=revert.name, error=revert.describe(), **common
    )
    raise ContractReverted(f"{action.type} round {action.round_id}: {revert.describe()}")
