"""Settled transactions a reorg took away: found when the indexer rewinds, sent again once.

An action is settled (journal CONFIRMED, run COMPLETED) once its receipt is
`INDEXER_CONFIRMATIONS` deep; a reorg deeper than that can still remove its transaction. The
indexer sees such a reorg (a stored block hash changed), and in the same transaction as its
rewind `unsettle` looks at every settled journal row of the chain above the fork block:
- a transaction still on the chain (mined again in another block) keeps its row, with the block
  it is in now;
- one the chain no longer has is not CONFIRMED any more: its row goes back to PENDING
  (`error_code` REORGED, the removed hash kept in `tx_hashes`), and
  - a chain action is sent again: its COMPLETED run is archived under `{job_id}@reorg:{tx}` and
    the same job (same id, its stored payload) staged in the outbox, so that the worker sends it
    after its preflight (an action done meanwhile ends as already done);
  - a keeper transaction needs nothing more: its next pass finds the row pending and sends the
    draw or the close again.
The row's status is the guard: only a CONFIRMED row is moved, in the rewind's transaction, so a
removed transaction is re-sent once however often the indexer looks. Each is logged
(`chain.settled_tx_reorged`) and counted in `fleet chain status`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy import text
from sqlalchemy.orm import Session

from chain.client import ChainClient
from shared import outbox
from shared.jobs import catalog

log = structlog.get_logger("jobfleet.chain.reconcile")

#: The archived run's suffix: `{job_id}@reorg:{first 12 hex digits of the removed tx}`.
ARCHIVE = "@reorg:"
#: The queue of the actions the journal settles (workers/chain_actions/jobs.py): the runs a reorg
#: archives are of its jobs, which `reorg_status` counts through the job-name index.
ACTION_QUEUE = "chain-actions"
REORGED = "REORGED"


@dataclass
class Unsettled:
    #: Chain actions staged again (their ids released in the enqueue gate before the commit).
    resent: list[str] = field(default_factory=list)
    #: Keeper rows back to pending (the keeper's next pass sends again).
    reopened: list[str] = field(default_factory=list)
    #: Settled transactions found in another block (still on chain).
    moved: int = 0


def unsettle(session: Session, client: ChainClient, chain_id: int, fork_block: int) -> Unsettled:
    result = Unsettled()
    rows = session.execute(
        text(
            "SELECT job_id, type, tx_hash, block_number FROM chain_actions WHERE chain_id = :c"
            " AND status = 'CONFIRMED' AND block_number > :fork AND tx_hash IS NOT NULL"
            " ORDER BY id FOR UPDATE"
        ),
        {"c": chain_id, "fork": fork_block},
    ).all()
    for job_id, kind, tx_hash, block in rows:
        receipt = client.receipt(tx_hash)
        if receipt is not None:
            now_in = int(receipt["blockNumber"], 16)
            if now_in != block:
                session.execute(
                    text("UPDATE chain_actions SET block_number = :b WHERE job_id = :j"),
                    {"b": now_in, "j": job_id},
                )
                result.moved += 1
            continue
        session.execute(
            text(
                "UPDATE chain_actions SET status = 'PENDING', error_code = :code, error = :error,"
                " nonce = NULL, raw_tx = NULL, confirmed_at = NULL, updated_at = now()"
                " WHERE job_id = :j AND status = 'CONFIRMED'"
            ),
            {
                "code": REORGED,
                "error": f"{tx_hash} (block {block}) removed by a reorg above block {fork_block}",
                "j": job_id,
            },
        )
        resent = _stage_again(session, str(job_id), str(tx_hash))
        (result.resent if resent else result.reopened).append(str(job_id))
        log.warning(
            "chain.settled_tx_reorged",
            job_id=job_id,
            action=kind,
            tx_hash=tx_hash,
            block=block,
            fork_block=fork_block,
            then="staged again" if resent else "pending again (the keeper's next pass)",
        )
    return result


def _stage_again(session: Session, job_id: str, tx_hash: str) -> bool:
    """Archive the job's run and stage the same job again; False when no run has this id (a
    keeper row)."""
    row = session.execute(
        text(
            "UPDATE job_runs SET job_id = job_id || :suffix WHERE job_id = :j"
            " RETURNING job_name, payload"
        ),
        {"suffix": ARCHIVE + tx_hash.removeprefix("0x")[:12], "j": job_id},
    ).first()
    if row is None:
        return False
    spec = catalog.get(str(row[0]))
    payload: dict[str, Any] = dict(row[1])
    outbox.enqueue(session, spec, payload, event_type="reconciler:reorged")
    return True


def reorg_status(conn: Any, chain_id: int | None) -> dict[str, Any]:
    """`fleet chain status` (and the console's Chain page, `chain_id` None: every chain):
    settled actions a reorg took away and re-sent, and a warning naming those not settled again
    yet (their journal row still says REORGED)."""
    scope, params = ("AND chain_id = %s", [chain_id]) if chain_id is not None else ("", [])
    runs_scope = f"%-{chain_id}-%" if chain_id is not None else "%"
    # By job name first (ix_job_runs_console_job): the archived ids' pattern cannot use an index,
    # and a scan of every run took the Chain page to 277 ms p95 on 1,000,000 runs.
    jobs = [spec.name for spec in catalog.ALL if spec.queue == ACTION_QUEUE]
    resent = conn.execute(
        "SELECT count(*) FROM job_runs WHERE job_name = ANY(%s)"
        " AND job_id LIKE %s AND job_id LIKE %s",
        (jobs, runs_scope, f"%{ARCHIVE}%"),
    ).fetchone()[0]
    waiting = conn.execute(
        "SELECT job_id FROM chain_actions WHERE error_code = %s"
        f" AND status NOT IN ('CONFIRMED', 'ALREADY_DONE') {scope} ORDER BY id",
        [REORGED, *params],
    ).fetchall()
    status: dict[str, Any] = {"reorged_settled_actions": int(resent)}
    if waiting:
        status["reorged_warning"] = (
            f"{len(waiting)} settled transaction(s) removed by a reorg, not settled again yet: "
            + ", ".join(str(r[0]) for r in waiting[:5])
        )
    return status
