"""The chain actions' outcome rules on a real node, through the domain function (in process)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from chain.abi import BADGE, LOTTERY, encode_call
from chain.transactions import TxRequest
from shared.errors import PermanentError
from tests.support.chain.world import TICKET, World, project_ticket
from workers.chain_actions.client import CLAIM_PRIZE, CLAIM_REFUND, MINT_BADGE
from workers.chain_actions.domain import Action, perform
from workers.chain_actions.job_ids import chain_job_id

ZERO = "0x" + "00" * 20


def action(kind: str, round_id: int, address: str, *, deps: Any, ticket: bool = True) -> Action:
    """The action a v2 payload for the session's lottery asks for (a mint: for a player the
    projections know in that round, unless `ticket` is False)."""
    lottery = deps.contract_address(LOTTERY)
    job_id = chain_job_id(kind, deps.chain_id, lottery, round_id, address)
    if kind == MINT_BADGE and ticket:
        with deps.connect() as conn:
            project_ticket(conn, deps.chain_id, lottery, round_id, address)
    return Action(kind, job_id, round_id, address, deps.chain_id, lottery)


def journal_row(db: Any, job_id: str) -> dict[str, Any]:
    cur = db.execute(
        "SELECT status, error_code, tx_hash, gas_used, jsonb_array_length(tx_hashes) FROM chain_actions"
        " WHERE job_id = %s",
        (job_id,),
    )
    status, code, tx_hash, gas, sent = cur.fetchone()
    return {"status": status, "error_code": code, "tx_hash": tx_hash, "gas_used": gas, "sent": sent}


def test_mint_badge_mints_once_then_reports_already_minted(
    world: World, deps: Any, db: Any
) -> None:
    player = world.accounts[3].address
    first = perform(action(MINT_BADGE, 1, player, deps=deps), deps)
    assert first["outcome"] == "confirmed" and first["signer"] == world.operator.address
    assert world.has_badge(player, 1)
    assert journal_row(db, action(MINT_BADGE, 1, player, deps=deps).job_id)["status"] == "CONFIRMED"

    # The same mint under another key.
    other_job = replace(action(MINT_BADGE, 1, player, deps=deps), job_id="MINT_BADGE-again")
    again = perform(other_job, deps)
    assert again == {
        **again,
        "outcome": "already_done",
        "error": "BadgeAlreadyMinted",
        "tx_hash": None,
    }
    assert world.badge_call("balanceOf", player)[0] == 1


def test_claim_prize_pays_the_winner_then_reports_already_claimed(
    world: World, deps: Any, db: Any
) -> None:
    round_id, winner = world.drawn_round(world.accounts[1], world.accounts[2])
    before = world.client.balance(winner.address)
    done_action = action(CLAIM_PRIZE, round_id, winner.address, deps=deps)
    done = perform(done_action, deps)
    assert done["outcome"] == "confirmed" and done["signer"] == winner.address
    fee_bound = 10**16
    assert world.client.balance(winner.address) > before + 2 * TICKET - fee_bound
    again = perform(replace(done_action, job_id="CLAIM_PRIZE-again"), deps)
    assert again["outcome"] == "already_done" and again["error"] == "PrizeAlreadyClaimed"


def test_claim_refund_repays_the_payer_then_reports_nothing_to_refund(
    world: World, deps: Any
) -> None:
    payer = world.accounts[4]
    round_id = world.cancelled_round(payer)
    paid = world.lottery_call("paidBy", round_id, payer.address)[0]
    assert paid == 2 * TICKET
    done_action = action(CLAIM_REFUND, round_id, payer.address, deps=deps)
    done = perform(done_action, deps)
    assert done["outcome"] == "confirmed"
    assert world.lottery_call("paidBy", round_id, payer.address)[0] == 0
    again = perform(replace(done_action, job_id="CLAIM_REFUND-again"), deps)
    assert again["outcome"] == "already_done" and again["error"] == "NothingToRefund"


@pytest.mark.parametrize(
    ("scenario", "error"),
    [
        ("claim a prize one did not win", "NotWinner"),
        ("claim the prize of a round still open", "RoundNotCompleted"),
        ("claim a refund of a drawn round", "RoundNotCancelled"),
        ("mint a badge to the zero address", "ZeroAddressNotAllowed"),
    ],
)
def test_definitive_reverts_fail_permanently_with_the_error_name(
    world: World, deps: Any, db: Any, scenario: str, error: str
) -> None:
    if error == "NotWinner":
        round_id, winner = world.drawn_round(world.accounts[1], world.accounts[2])
        loser = world.accounts[2] if winner == world.accounts[1] else world.accounts[1]
        job = action(CLAIM_PRIZE, round_id, loser.address, deps=deps)
    elif error == "RoundNotCompleted":
        job = action(CLAIM_PRIZE, world.current_round(), world.accounts[1].address, deps=deps)
    elif error == "RoundNotCancelled":
        round_id, winner = world.drawn_round(world.accounts[1], world.accounts[2])
        job = action(CLAIM_REFUND, round_id, world.accounts[1].address, deps=deps)
    else:
        job = action(MINT_BADGE, 1, ZERO, deps=deps)
    nonce = world.nonce(world.operator.address)
    with pytest.raises(PermanentError) as failure:
        perform(job, deps)
    assert failure.value.code == error
    assert journal_row(db, job.job_id) == {
        **journal_row(db, job.job_id),
        "status": "FAILED",
        "error_code": error,
    }
    assert world.nonce(world.operator.address) == nonce  # decided by the preflight: no gas spent


@pytest.mark.parametrize(
    ("who", "reason"),
    [(8, "unknown wallet"), (7, "has no stored key")],
)
def test_a_wallet_without_a_key_completes_doing_nothing(
    world: World, deps: Any, db: Any, who: int, reason: str
) -> None:
    round_id = world.cancelled_round(world.accounts[who])
    job = action(CLAIM_REFUND, round_id, world.accounts[who].address, deps=deps)
    nonce = world.nonce(world.accounts[who].address)
    result = perform(job, deps)
    assert result["outcome"] == "skipped" and reason in result["reason"]
    assert journal_row(db, job.job_id)["status"] == "SKIPPED"
    assert world.nonce(world.accounts[who].address) == nonce


def test_a_mined_revert_is_decoded_into_its_custom_error(world: World, deps: Any) -> None:
    """Sent despite its preflight: the receipt says status 0 and the replay names the error."""
    player = world.accounts[5].address
    perform(action(MINT_BADGE, 2, player, deps=deps), deps)
    deps.journal.begin("forced-revert", type=MINT_BADGE, round_id=2, address=player)
    request = TxRequest(
        "forced-revert", world.contracts[BADGE], encode_call(BADGE, "mintBadge", player, 2)
    )
    outcome = deps.sender.execute(world.operator, request, preflight=False)
    assert outcome.tx_hash is not None and outcome.gas_used and not outcome.confirmed
    assert outcome.revert is not None and outcome.revert.name == "BadgeAlreadyMinted"
    assert outcome.revert.args["roundId"] == 2


def test_a_mint_for_a_player_without_a_ticket_is_refused(world: World, deps: Any) -> None:
    """Payloads are not trusted: a badge needs the player's ticket in the projections."""
    nonce = world.nonce(world.operator.address)
    with pytest.raises(PermanentError) as no_ticket:
        perform(action(MINT_BADGE, 1, world.accounts[3].address, deps=deps, ticket=False), deps)
    assert no_ticket.value.code == "NOT_A_PLAYER"
    assert not world.has_badge(world.accounts[3].address, 1)
    assert world.nonce(world.operator.address) == nonce


def test_a_claim_for_the_operator_wallet_is_refused(world: World, deps: Any) -> None:
    """Claims are signed by player wallets only: never with the operator's key."""
    operator = world.operator.address
    round_id = world.cancelled_round(world.operator)  # the operator bought tickets itself
    nonce = world.nonce(operator)
    with pytest.raises(PermanentError) as operator_claim:
        perform(action(CLAIM_REFUND, round_id, operator, deps=deps), deps)
    assert operator_claim.value.code == "NOT_A_PLAYER_WALLET"
    assert world.lottery_call("paidBy", round_id, operator)[0] == 2 * TICKET  # not refunded
    assert world.nonce(operator) == nonce


def test_a_v1_action_is_journaled_under_the_scoped_key_of_the_configured_lottery(
    world: World, deps: Any, db: Any
) -> None:
    """A v1 message (queued before payloads named their chain) keeps its v1 job id; its journal
    row is the one a v2 message for the same intent would use: one row, one transaction."""
    player = world.accounts[3].address
    scoped = action(MINT_BADGE, 4, player, deps=deps)  # projects the ticket too
    legacy = Action(MINT_BADGE, f"MINT_BADGE-4-{player.lower()}", 4, player)
    assert perform(legacy, deps)["outcome"] == "confirmed"
    assert journal_row(db, scoped.job_id)["status"] == "CONFIRMED"
    assert db.execute(
        "SELECT count(*) FROM chain_actions WHERE job_id = %s", (legacy.job_id,)
    ).fetchone() == (0,)
    again = perform(scoped, deps)  # the v2 message for the same intent: already recorded
    assert again["outcome"] == "confirmed" and again["recorded"] is True
    assert world.badge_call("balanceOf", player)[0] == 1
