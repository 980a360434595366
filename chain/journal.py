"""The `chain_actions` table: what was asked, what was broadcast, how it ended.

It is the transaction journal of `transactions.TxSender`: a signed transaction is recorded
(hash, nonce, raw bytes, fees) with a synchronous commit *before* it is broadcast, so a process
that dies at any point leaves enough for the next delivery to find the transaction again
instead of sending a second one. Rows are keyed by job id (`MINT_BADGE-3-0xabc...`); the
scheduler's keeper can journal its own transactions here under its own keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from psycopg.types.json import Jsonb

#: Row statuses. PENDING: nothing in flight; SENT: a transaction is journaled and maybe in flight.
PENDING, SENT, CONFIRMED, ALREADY_DONE, FAILED, SKIPPED = (
    "PENDING",
    "SENT",
    "CONFIRMED",
    "ALREADY_DONE",
    "FAILED",
    "SKIPPED",
)
FINAL = frozenset({CONFIRMED, ALREADY_DONE, FAILED, SKIPPED})

ConnectionFactory = Callable[[], AbstractContextManager[Any]]


@dataclass(frozen=True)
class Broadcast:
    """One signed transaction (a replacement is another one with the same nonce)."""

    tx_hash: str
    nonce: int
    max_fee: int
    priority_fee: int
    gas: int
    raw: bytes = field(repr=False, default=b"")

    def entry(self) -> dict[str, Any]:
        return {
            "tx_hash": self.tx_hash,
            "nonce": self.nonce,
            "max_fee": self.max_fee,
            "priority_fee": self.priority_fee,
            "gas": self.gas,
            "at": time.time(),  # when it was journaled: a later delivery knows its age
        }


@dataclass(frozen=True)
class InFlight:
    """The journaled transactions of the current nonce, oldest first; `raw` is the latest."""

    signer: str
    nonce: int
    broadcasts: tuple[Broadcast, ...]
    raw: bytes = field(repr=False)
    #: Seconds since the latest broadcast was journaled (0 when the journal did not say).
    age_s: float = 0.0

    @property
    def latest(self) -> Broadcast:
        return self.broadcasts[-1]


@dataclass(frozen=True)
class ActionRow:
    job_id: str
    type: str
    status: str
    round_id: int | None
    address: str | None
    signer: str | None
    tx_hash: str | None
    gas_used: int | None
    block_number: int | None
    error_code: str | None
    attempts: int


_COLUMNS = (
    "job_id, type, status, round_id, address, signer, tx_hash, gas_used, block_number,"
    " error_code, attempts"
)


class ActionJournal:
    """`connect()` yields a psycopg connection (a pool's `connection`); commits are durable."""

    def __init__(self, connect: ConnectionFactory) -> None:
        self._connect = connect

    def _tx(self) -> Any:
        return self._connect()

    def begin(
        self,
        job_id: str,
        *,
        type: str,
        round_id: int | None,
        address: str | None,
        chain_id: int | None = None,
        contract: str | None = None,
    ) -> ActionRow:
        """Create the row (PENDING) or count another delivery of an existing one."""
        with self._tx() as conn:
            row = conn.execute(
                f"""
                INSERT INTO chain_actions
                    (job_id, type, round_id, address, chain_id, contract, status, attempts)
                VALUES (%s, %s, %s, %s, %s, %s, 'PENDING', 1)
                ON CONFLICT (job_id) DO UPDATE SET
                    attempts = chain_actions.attempts + 1, updated_at = now(),
                    chain_id = COALESCE(chain_actions.chain_id, EXCLUDED.chain_id),
                    contract = COALESCE(chain_actions.contract, EXCLUDED.contract)
                RETURNING {_COLUMNS}
                """,
                (job_id, type, round_id, address, chain_id, contract),
            ).fetchone()
        return ActionRow(*row)

    def get(self, job_id: str) -> ActionRow | None:
        with self._tx() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM chain_actions WHERE job_id = %s", (job_id,)
            ).fetchone()
        return ActionRow(*row) if row else None

    def settled(self, job_id: str) -> tuple[str, str | None] | None:
        """(status, tx_hash) when the row is CONFIRMED or ALREADY_DONE: nothing left to send."""
        with self._tx() as conn:
            row = conn.execute(
                "SELECT status, tx_hash FROM chain_actions WHERE job_id = %s"
                " AND status IN ('CONFIRMED', 'ALREADY_DONE')",
                (job_id,),
            ).fetchone()
        return (str(row[0]), row[1]) if row else None

    def in_flight(self, job_id: str) -> InFlight | None:
        with self._tx() as conn:
            row = conn.execute(
                "SELECT signer, nonce, tx_hashes, raw_tx FROM chain_actions"
                " WHERE job_id = %s AND status = 'SENT'",
                (job_id,),
            ).fetchone()
        if not row or row[1] is None or row[3] is None:
            return None
        signer, nonce, entries, raw = row
        broadcasts = tuple(
            Broadcast(e["tx_hash"], e["nonce"], e["max_fee"], e["priority_fee"], e["gas"])
            for e in entries
            if e.get("nonce") == nonce
        )
        if not broadcasts:
            return None
        at = [e["at"] for e in entries if e.get("nonce") == nonce and e.get("at")]
        age = max(0.0, time.time() - at[-1]) if at else 0.0
        return InFlight(
            signer=signer, nonce=nonce, broadcasts=broadcasts, raw=bytes(raw), age_s=age
        )

    def record_broadcast(self, job_id: str, signer: str, broadcast: Broadcast) -> None:
        """Durably journal a signed transaction before it leaves the process."""
        with self._tx() as conn:
            conn.execute("SET LOCAL synchronous_commit TO on")
            cur = conn.execute(
                """
                UPDATE chain_actions SET status = 'SENT', signer = %s, nonce = %s, tx_hash = %s,
                    raw_tx = %s, tx_hashes = tx_hashes || %s, updated_at = now()
                WHERE job_id = %s
                """,
                (
                    signer,
                    broadcast.nonce,
                    broadcast.tx_hash,
                    broadcast.raw,
                    Jsonb([broadcast.entry()]),
                    job_id,
                ),
            )
            if cur.rowcount != 1:
                # Broadcasting without a journal row would make a crash unrecoverable.
                raise LookupError(f"no chain_actions row {job_id!r}: call begin() before sending")

    def forget_in_flight(self, job_id: str) -> None:
        """The journaled nonce was consumed by another transaction: nothing of ours is in flight."""
        with self._tx() as conn:
            conn.execute(
                "UPDATE chain_actions SET status = 'PENDING', nonce = NULL, raw_tx = NULL,"
                " updated_at = now() WHERE job_id = %s AND status = 'SENT'",
                (job_id,),
            )

    def finish(
        self,
        job_id: str,
        status: str,
        *,
        signer: str | None = None,
        tx_hash: str | None = None,
        gas_used: int | None = None,
        block_number: int | None = None,
        error_code: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Record how the action ended. True when this call settled it: the row was not
        already CONFIRMED or ALREADY_DONE (two holders awaiting one transaction both see it
        mined; only the first to finish says it did it). Never moves a row back from done."""
        with self._tx() as conn:
            conn.execute("SET LOCAL synchronous_commit TO on")
            row = conn.execute(
                """
                WITH prior AS (
                    SELECT status FROM chain_actions WHERE job_id = %s FOR UPDATE
                )
                UPDATE chain_actions SET status = %s, signer = COALESCE(%s, signer),
                    tx_hash = COALESCE(%s, tx_hash), gas_used = %s, block_number = %s,
                    error_code = %s, error = %s, raw_tx = NULL, updated_at = now(),
                    confirmed_at = CASE WHEN %s IN ('CONFIRMED', 'ALREADY_DONE') THEN now() END
                FROM prior
                WHERE job_id = %s
                  -- never back from done: a late delivery's failing preflight must not undo it
                  AND (prior.status NOT IN ('CONFIRMED', 'ALREADY_DONE')
                       OR %s IN ('CONFIRMED', 'ALREADY_DONE'))
                RETURNING prior.status
                """,
                (
                    job_id,
                    status,
                    signer,
                    tx_hash,
                    gas_used,
                    block_number,
                    error_code,
                    error,
                    status,
                    job_id,
                    status,
                ),
            ).fetchone()
        return row is not None and row[0] not in (CONFIRMED, ALREADY_DONE)
