"""Projecting decoded events into tables, the follow-up chain actions, and rewinding after a reorg.

Everything here runs in the indexer's one transaction per window (a SQLAlchemy session), so the
projections, the outbox events of the follow-up actions and the cursor commit together or not at
all. Inserts are `ON CONFLICT (chain_id, tx_hash, log_index) DO NOTHING`: a follow-up is staged
only for a log that was newly indexed, and only when no live log already asked for the same job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from shared import outbox
from shared.contracts import SYSTEM_ORG
from shared.jobs import catalog

from .events import Event

#: A follow-up action's job (staged by name, as any producer does) and its address field.
FOLLOW_UPS = {
    "MINT_BADGE": ("chain:mint_badge", "player"),
    "CLAIM_PRIZE": ("chain:claim_prize", "winner"),
    "CLAIM_REFUND": ("chain:claim_refund", "payer"),
}

#: Tables holding one row per projected log (rewound by block number).
LOG_TABLES = (
    "lottery_tickets",
    "lottery_winners",
    "lottery_cancellations",
    "badges",
    "lottery_rounds",
)


@dataclass
class Applied:
    logs: int = 0
    new_logs: int = 0
    actions: list[str] = field(default_factory=list)  # job ids staged in the outbox


def _insert(session: Session, sql: str, params: dict[str, Any]) -> bool:
    return (
        session.execute(text(sql + " ON CONFLICT DO NOTHING RETURNING 1"), params).first()
        is not None
    )


def _common(chain_id: int, event: Event) -> dict[str, Any]:
    log = event.log
    return {
        "org": SYSTEM_ORG,
        "chain_id": chain_id,
        "contract": log.contract,
        "tx_hash": log.tx_hash,
        "log_index": log.log_index,
        "block_number": log.block_number,
        "block_time": log.block_time,
    }


_COLS = "org_id, chain_id, contract, tx_hash, log_index, block_number, block_time"
_VALS = ":org, :chain_id, :contract, :tx_hash, :log_index, :block_number, :block_time"


def apply(session: Session, chain_id: int, events: Iterable[Event]) -> Applied:
    applied = Applied()
    for event in events:
        applied.logs += 1
        p = {**_common(chain_id, event), **event.args}
        if event.name == "RoundOpened":
            new = _insert(
                session,
                f"INSERT INTO lottery_rounds ({_COLS}, round_id, status, ticket_price_wei, end_time,"
                f" min_players) VALUES ({_VALS}, :round_id, 'OPEN', :ticket_price, :end_time, :min_players)",
                p,
            )
        elif event.name == "TicketsPurchased":
            new = _insert(
                session,
                f"INSERT INTO lottery_tickets ({_COLS}, round_id, player, ticket_count, amount_wei)"
                f" VALUES ({_VALS}, :round_id, :player, :count, :amount)",
                p,
            )
            if new:
                _follow_up(session, applied, chain_id, event, "MINT_BADGE", p["player"])
        elif event.name == "WinnerPicked":
            new = _insert(
                session,
                f"INSERT INTO lottery_winners ({_COLS}, round_id, winner, prize_wei)"
                f" VALUES ({_VALS}, :round_id, :winner, :prize)",
                p,
            )
            if new:
                _close_round(session, p, "COMPLETED")
                _follow_up(session, applied, chain_id, event, "CLAIM_PRIZE", p["winner"])
        elif event.name == "RoundCancelled":
            payers = _payers(session, chain_id, event)
            p["payers"] = len(payers)
            new = _insert(
                session,
                f"INSERT INTO lottery_cancellations ({_COLS}, round_id, payers)"
                f" VALUES ({_VALS}, :round_id, :payers)",
                p,
            )
            if new:
                _close_round(session, p, "CANCELLED")
                for payer in payers:
                    _follow_up(session, applied, chain_id, event, "CLAIM_REFUND", payer)
        else:  # BadgeMinted
            new = _insert(
                session,
                f"INSERT INTO badges ({_COLS}, player, round_id, token_id)"
                f" VALUES ({_VALS}, :player, :round_id, :token_id)",
                p,
            )
        applied.new_logs += int(new)
    return applied


def _payers(session: Session, chain_id: int, event: Event) -> list[str]:
    rows = session.execute(
        text(
            "SELECT DISTINCT player FROM lottery_tickets WHERE chain_id = :chain_id"
            " AND contract = :contract AND round_id = :round_id ORDER BY player"
        ),
        {"chain_id": chain_id, "contract": event.log.contract, "round_id": event.round_id},
    )
    return [str(r[0]) for r in rows]


def _close_round(session: Session, p: dict[str, Any], status: str) -> None:
    session.execute(
        text(
            "UPDATE lottery_rounds SET status = :status, closed_block_number = :block_number"
            " WHERE chain_id = :chain_id AND contract = :contract AND round_id = :round_id"
        ),
        {**p, "status": status},
    )


def _enqueued(session: Session, chain_id: int, job_id: str) -> bool:
    """Does an indexed event still stand behind the follow-up job `job_id`?"""
    row = session.execute(
        text(
            "SELECT 1 FROM indexed_actions WHERE chain_id = :chain_id AND job_id = :job_id"
            " AND status = 'ENQUEUED' LIMIT 1"
        ),
        {"chain_id": chain_id, "job_id": job_id},
    ).first()
    return row is not None


def _follow_up(
    session: Session, applied: Applied, chain_id: int, event: Event, kind: str, address: str
) -> None:
    # By declaration, as any producer stages a job: the chain actions' job of that kind,
    # scoped by chain and lottery (a redeployed lottery's round 1 is not the old one's).
    job_name, address_field = FOLLOW_UPS[kind]
    spec = catalog.get(job_name)
    payload = spec.build(
        {
            "org_id": SYSTEM_ORG,
            "chain_id": chain_id,
            "contract": event.log.contract,
            "round_id": event.round_id,
            address_field: address,
        }
    )
    job_id = spec.job_id(payload)
    outbox_id = None
    # A second purchase by the same player asks for the same badge: one job.
    if not _enqueued(session, chain_id, job_id):
        staged = outbox.enqueue(session, spec, payload, event_type=f"indexer:{event.name}")
        outbox_id = staged.id
        applied.actions.append(job_id)
    session.execute(
        text(
            "INSERT INTO indexed_actions (chain_id, job_name, job_id, outbox_event_id, tx_hash,"
            " log_index, block_number) VALUES (:chain_id, :job_name, :job_id, :outbox_id,"
            " :tx_hash, :log_index, :block_number) ON CONFLICT (chain_id, job_id, tx_hash, log_index)"
            " DO UPDATE SET status = 'ENQUEUED', outcome = NULL, block_number = EXCLUDED.block_number,"
            " outbox_event_id = COALESCE(EXCLUDED.outbox_event_id, indexed_actions.outbox_event_id)"
        ),
        {
            "chain_id": chain_id,
            "job_name": spec.name,
            "job_id": job_id,
            "outbox_id": outbox_id,
            "tx_hash": event.log.tx_hash,
            "log_index": event.log.log_index,
            "block_number": event.log.block_number,
        },
    )


@dataclass
class Rewound:
    fork_block: int
    logs_removed: int = 0
    #: Orphaned jobs whose outbox event was still unpublished: dropped in this transaction.
    unpublished: list[str] = field(default_factory=list)
    #: Orphaned jobs already published: to cancel after commit (`runs.cancel`).
    published: list[str] = field(default_factory=list)


def rewind(session: Session, chain_id: int, fork_block: int) -> Rewound:
    """Remove everything projected above `fork_block` and orphan the actions only it asked for."""
    result = Rewound(fork_block)
    above = {"chain_id": chain_id, "fork": fork_block}
    orphans = session.execute(
        text(
            "UPDATE indexed_actions SET status = 'ORPHANED', outcome = 'reorg above block '"
            " || :fork WHERE chain_id = :chain_id AND block_number > :fork AND status = 'ENQUEUED'"
            " RETURNING job_id"
        ),
        above,
    )
    orphaned = sorted({str(r[0]) for r in orphans})
    for job_id in orphaned:
        if _enqueued(session, chain_id, job_id):  # still wanted by a canonical event
            continue
        dropped = session.execute(
            text(
                "UPDATE outbox_events SET status = 'FAILED', error = 'ORPHANED: reorg above block '"
                " || :fork WHERE job_id = :job_id AND status = 'PENDING' RETURNING id"
            ),
            {"fork": fork_block, "job_id": job_id},
        ).first()
        (result.unpublished if dropped else result.published).append(job_id)
    result.logs_removed = remove_above(session, chain_id, fork_block)
    return result


def remove_above(session: Session, chain_id: int, block: int) -> int:
    """Delete the projected logs above `block` (rounds they closed open again) and the stored
    hashes above it; the follow-up actions they asked for are left as they are. Returns how many
    logs were removed."""
    above = {"chain_id": chain_id, "fork": block}
    removed = 0
    # Rounds closed above the fork are open again (their closing log is gone).
    session.execute(
        text(
            "UPDATE lottery_rounds SET status = 'OPEN', closed_block_number = NULL"
            " WHERE chain_id = :chain_id AND closed_block_number > :fork"
        ),
        above,
    )
    for table in LOG_TABLES:
        removed += session.execute(
            text(f"DELETE FROM {table} WHERE chain_id = :chain_id AND block_number > :fork"), above
        ).rowcount  # type: ignore[attr-defined]
    session.execute(
        text("DELETE FROM indexed_blocks WHERE chain_id = :chain_id AND block_number > :fork"),
        above,
    )
    return removed
