"""The chain indexer: contract logs from the stored cursor to `head - confirmations`.

One pass (`sync_once`) indexes windows of at most `window` blocks back to back, within a time
budget. Each window is one database transaction that:
1. takes a transaction-scoped advisory lock (one active indexer across replicas; a replica that
   does not get it skips the tick) and reads the cursor;
2. checks the cursor block's stored hash against the node: a mismatch is a reorg, rewound to the
   highest stored block whose hash is still canonical, or to the block before the start when the
   fork is deeper than every stored hash (projections above it deleted, actions only orphaned
   logs asked for cancelled), and the node's hash of that block stored: one rewind, one line;
3. reads the window's logs, with the window's last header fetched before and after: a changed
   hash means the chain moved under the read, and the window is retried at the next tick;
4. projects the events and stages the follow-up actions in the outbox (same transaction), stores
   the hashes of the blocks with logs and of the window's end, and advances the cursor.
Any RPC error rolls the window back: the next tick starts from the same cursor (no gap), and a
process killed mid-window leaves nothing half-done (no duplicate).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from prometheus_client import Counter, Gauge
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from chain.client import ChainClient
from shared.errors import InvalidState

from .events import decode_all, topics
from .projection import Rewound, apply, remove_above, rewind
from .reconcile import Unsettled, unsettle

log = structlog.get_logger("jobfleet.chain.indexer")

CURSOR = "lottery"
#: pg advisory lock key of the indexer (one per chain: chain id added).
LOCK_BASE = 0x1D3E_0000_0000

LAG = Gauge("jobfleet_indexer_lag_blocks", "Blocks between the head and the indexer cursor",
            multiprocess_mode="max")  # fmt: skip
BLOCKS = Counter("jobfleet_indexer_blocks_total", "Blocks indexed")
LOGS = Counter("jobfleet_indexer_logs_total", "Logs indexed (newly projected)")
REORGS = Counter("jobfleet_indexer_reorgs_total", "Reorgs detected and rewound")


class ChainMoved(Exception):
    """The window's last block changed while its logs were read: retried at the next tick."""


@dataclass(frozen=True)
class IndexerConfig:
    chain_id: int
    lottery: str
    badge: str
    start_block: int
    confirmations: int = 3
    window: int = 2_000
    budget_s: float = 2.0
    hash_depth: int = 1_000


@dataclass
class SyncResult:
    busy: bool = False
    windows: int = 0
    blocks: int = 0
    logs: int = 0
    actions: list[str] = field(default_factory=list)
    reorgs: list[Rewound] = field(default_factory=list)
    #: Settled transactions those reorgs removed (their actions staged again).
    unsettled: list[Unsettled] = field(default_factory=list)
    cursor: int | None = None
    head: int | None = None

    @property
    def lag(self) -> int | None:
        if self.cursor is None or self.head is None:
            return None
        return max(0, self.head - self.cursor)


Cancel = Callable[[str], str]
#: Releases job ids in the enqueue gate (`EnqueueGate.forget`) so that they can be sent again.
Release = Callable[[list[str]], None]


def _keep(job_ids: list[str]) -> None:
    """No gate given (a caller without a broker, a test): said loudly, since the relay finds the
    ids still held within the dedup window and publishes nothing for them."""
    log.error(
        "indexer.resend_not_released",
        job_ids=job_ids,
        hint="pass release=runtime.sender.gate.forget to sync_once",
    )


def sync_once(
    client: ChainClient,
    sessions: sessionmaker[Session],
    config: IndexerConfig,
    *,
    cancel: Cancel,
    release: Release = _keep,
    clock: Callable[[], float] = time.monotonic,
) -> SyncResult:
    """Index windows until caught up or out of budget; `cancel(job_id)` cancels a published job,
    `release(job_ids)` frees the ids of settled actions a reorg removed, staged again."""
    result = SyncResult(head=client.block_number())  # once per pass: windows chase a fixed target
    deadline = clock() + config.budget_s
    while True:
        try:
            step = _window(client, sessions, config, result, release)
        except ChainMoved as exc:
            log.warning("indexer.chain_moved", error=str(exc))
            break
        if step == "reorg":  # committed: now cancel the orphaned jobs already published
            _cancel_published(result.reorgs[-1], cancel)
        if step in ("busy", "caught_up") or clock() >= deadline:
            break
    if result.lag is not None:
        LAG.set(result.lag)
    return result


@dataclass
class Reindexed:
    """`fleet chain reindex --from-block N`: what was removed and what the re-index staged."""

    from_block: int
    logs_removed: int
    logs: int = 0
    #: Follow-up actions staged by the re-index: only those no indexed event had enqueued.
    staged: list[str] = field(default_factory=list)
    cursor: int | None = None
    head: int | None = None


class NothingToReindex(InvalidState):
    """The indexer has not indexed that block yet: nothing to re-index."""


def reindex(
    client: ChainClient,
    sessions: sessionmaker[Session],
    config: IndexerConfig,
    from_block: int,
    *,
    cancel: Cancel,
    release: Release = _keep,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Reindexed:
    """Rebuild the projections from `from_block`: in one transaction (under the indexer's lock,
    waited for), delete what was projected from that block on and set the cursor just below it;
    then index up to the head as the indexer does. Idempotent: the follow-up actions already
    enqueued (`indexed_actions`) are not staged again, and a second run rebuilds the same rows.
    A running scheduler's indexer may index part of the way meanwhile: the same windows, the
    same rows."""
    head = client.block_number()
    with sessions.begin() as session:
        session.execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_BASE + config.chain_id}
        )
        cursor, _ = _cursor(session, config)
        if from_block > cursor + 1 or from_block > head:
            raise NothingToReindex(
                f"block {from_block} is not indexed yet (indexer cursor {cursor}, head {head}):"
                " nothing to re-index"
            )
        below = from_block - 1
        removed = remove_above(session, config.chain_id, below)
        below_hash = _hash(client, below) if below >= 0 else None
        if below_hash is not None:
            _store_hashes(session, config, {below: below_hash}, keep_from=below - config.hash_depth)
        _save_cursor(session, config, below, below_hash)
    log.warning("indexer.reindex", from_block=from_block, cursor_was=cursor, logs_removed=removed)
    done = Reindexed(from_block, removed, cursor=below, head=head)
    while done.cursor is None or done.cursor < head - config.confirmations:
        step = sync_once(client, sessions, config, cancel=cancel, release=release, clock=clock)
        done.logs += step.logs
        done.staged += step.actions
        done.cursor = step.cursor if step.cursor is not None else done.cursor
        if step.busy:
            sleep(0.1)  # the scheduler's indexer holds the lock for a window: it goes on too
    return done


def _window(
    client: ChainClient,
    sessions: sessionmaker[Session],
    config: IndexerConfig,
    result: SyncResult,
    release: Release,
) -> str:
    with sessions.begin() as session:
        lock = LOCK_BASE + config.chain_id
        if not session.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": lock}).scalar():
            result.busy = True
            return "busy"
        cursor, cursor_hash = _cursor(session, config)
        head = result.head or 0
        result.cursor = cursor
        if cursor_hash is not None and _hash(client, cursor) != cursor_hash:
            fork, deep = _fork_point(client, session, config, cursor)
            rewound = rewind(session, config.chain_id, fork)
            # The node's hash of the fork block, not the stored one: when the fork is deeper
            # than every stored hash, the stored hash there is stale too, and comparing the
            # next window against it would find the same "reorg" again, forever.
            fork_hash = _hash(client, fork) if fork >= 0 else None
            if fork_hash is not None:
                _store_hashes(
                    session, config, {fork: fork_hash}, keep_from=fork - config.hash_depth
                )
            _save_cursor(session, config, fork, fork_hash)
            # Settled transactions above the fork that the chain no longer has: not CONFIRMED
            # any more, their actions staged again, in this same transaction (so once).
            unsettled = unsettle(session, client, config.chain_id, fork)
            if unsettled.resent:
                release(unsettled.resent)  # before the commit: the relay must not find them held
            result.unsettled.append(unsettled)
            REORGS.inc()
            result.reorgs.append(rewound)
            result.cursor = fork
            log.warning(
                "indexer.reorg",
                cursor=cursor,
                fork_block=fork,
                deeper_than_stored_hashes=deep,
                logs_removed=rewound.logs_removed,
                unpublished_dropped=len(rewound.unpublished),
                published_to_cancel=len(rewound.published),
                settled_resent=len(unsettled.resent),
                settled_reopened=len(unsettled.reopened),
            )
            return "reorg"
        target = head - config.confirmations
        if target <= cursor:
            return "caught_up"
        end = min(cursor + config.window, target)
        before = _hash(client, end)
        raw = client.request(
            "eth_getLogs",
            [
                {
                    "fromBlock": hex(cursor + 1),
                    "toBlock": hex(end),
                    "address": [config.lottery, config.badge],
                    "topics": [sorted(topics())],
                }
            ],
        )
        if _hash(client, end) != before:
            raise ChainMoved(f"block {end} changed while its logs were read")
        if cursor_hash is not None and _hash(client, cursor) != cursor_hash:
            raise ChainMoved(f"block {cursor} changed while the window was read")
        events = decode_all(list(raw or []))
        applied = apply(session, config.chain_id, events)
        hashes: dict[int, str | None] = {e.log.block_number: e.log.block_hash for e in events}
        hashes[end] = before
        _store_hashes(session, config, hashes, keep_from=end - config.hash_depth)
        _save_cursor(session, config, end, before)
    BLOCKS.inc(end - cursor)
    LOGS.inc(applied.new_logs)
    result.windows += 1
    result.blocks += end - cursor
    result.logs += applied.new_logs
    result.actions += applied.actions
    result.cursor = end
    return "caught_up" if end >= target else "more"


def _cancel_published(rewound: Rewound, cancel: Cancel) -> None:
    for job_id in rewound.published:
        try:
            outcome = cancel(job_id)
        except Exception as exc:  # not found (not recorded yet), already finished: say so
            outcome = f"{type(exc).__name__}: {exc}"
        log.warning("indexer.orphaned_action", job_id=job_id, outcome=outcome)


def _hash(client: ChainClient, number: int) -> str | None:
    block = client.request("eth_getBlockByNumber", [hex(number), False])
    return str(block["hash"]).lower() if block else None


def _cursor(session: Session, config: IndexerConfig) -> tuple[int, str | None]:
    row = session.execute(
        text("SELECT block_number, block_hash FROM chain_cursor WHERE name = :n AND chain_id = :c"),
        {"n": CURSOR, "c": config.chain_id},
    ).first()
    if row is None:
        return config.start_block - 1, None
    return int(row[0]), row[1]


def _save_cursor(
    session: Session, config: IndexerConfig, block: int, block_hash: str | None
) -> None:
    session.execute(
        text(
            "INSERT INTO chain_cursor (name, chain_id, block_number, block_hash) VALUES (:n, :c, :b, :h)"
            " ON CONFLICT (name, chain_id) DO UPDATE SET block_number = EXCLUDED.block_number,"
            " block_hash = EXCLUDED.block_hash, updated_at = now()"
        ),
        {"n": CURSOR, "c": config.chain_id, "b": block, "h": block_hash},
    )


def _store_hashes(
    session: Session, config: IndexerConfig, hashes: dict[int, str | None], *, keep_from: int
) -> None:
    rows: list[dict[str, Any]] = [
        {"c": config.chain_id, "b": b, "h": h} for b, h in sorted(hashes.items()) if h
    ]
    session.execute(
        text(
            "INSERT INTO indexed_blocks (chain_id, block_number, block_hash) VALUES (:c, :b, :h)"
            " ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = EXCLUDED.block_hash"
        ),
        rows,
    )
    session.execute(
        text("DELETE FROM indexed_blocks WHERE chain_id = :c AND block_number < :keep"),
        {"c": config.chain_id, "keep": keep_from},
    )


def _fork_point(
    client: ChainClient, session: Session, config: IndexerConfig, cursor: int
) -> tuple[int, bool]:
    """The highest stored block at or below the cursor whose hash the node still has, and
    whether the fork is deeper than every stored hash (then: the block before the start, the
    only one known to be safe; projections are idempotent, re-indexing costs time only)."""
    rows = session.execute(
        text(
            "SELECT block_number, block_hash FROM indexed_blocks WHERE chain_id = :c"
            " AND block_number <= :cursor ORDER BY block_number DESC"
        ),
        {"c": config.chain_id, "cursor": cursor},
    ).all()
    for number, stored in rows:
        if _hash(client, int(number)) == stored:
            return int(number), False
    return config.start_block - 1, True
