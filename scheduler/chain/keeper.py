"""The lottery keeper: draws a ready round, closes an expired one, one replica at a time.

A pass (`run_once`):
1. takes the Redis lock `chain:keeper-lock` (`SET NX PX`, a random token naming its holder, TTL
   max(interval, 5 s)); Redis down or the lock held elsewhere → nothing is sent;
2. unless the contract is paused: a keeper transaction still pending (journaled SENT in
   `chain_actions`) is settled first and nothing new is sent; else `requestDraw()` when
   `isDrawReady()`, else `closeExpiredRound()` when `isExpiredWithoutDraw()`;
3. just before sending, a fencing check: the token must still hold the lock (compare-and-extend);
   a holder whose lock expired (a stalled process) sends nothing. While the transaction is
   awaited the lock is renewed; the journal key (`KEEPER_DRAW-<chain id>-<lottery>-<round>`) makes a send
   by another holder of the same round reconcile the first transaction instead of a second one;
4. releases the lock with a compare-and-delete. Every pass that did something is recorded in
   `keeper_actions` (`fleet chain status` shows the last one).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import Counter, Gauge

from chain.abi import LOTTERY, decode_result, encode_call
from chain.client import ChainClient
from chain.journal import ActionJournal
from chain.lock import HeldLock, LockLost
from chain.transactions import TxRequest, TxSender
from shared.errors import DependencyUnavailable

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

log = structlog.get_logger("jobfleet.chain.keeper")

RUNS = Counter("jobfleet_keeper_runs_total", "Keeper passes by outcome", ["outcome"])
HOLDER = Gauge("jobfleet_keeper_lock_held", "1 while this process holds the keeper lock",
               ["holder"], multiprocess_mode="livemax")  # fmt: skip

DRAW, CLOSE = "KEEPER_DRAW", "KEEPER_CLOSE"
_CALLS = {DRAW: "requestDraw", CLOSE: "closeExpiredRound"}
#: Outcomes that record no row (every 10 s while nothing happens would only grow the table).
_QUIET = frozenset({"idle", "not_leader", "paused", "node_down"})


def holder_id() -> str:
    """A random lock token that still tells an operator who holds the lock."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(8)}"


def lock_ttl_ms(interval_ms: int) -> int:
    return max(interval_ms, 5_000)


@dataclass
class KeeperDeps:
    redis: Any
    client: ChainClient
    sender: TxSender
    journal: ActionJournal
    connect: Callable[[], AbstractContextManager[Any]]  # a pool's `connection`
    chain_id: int
    lottery: str
    operator: Callable[[], LocalAccount | None]
    lock_key: str = "chain:keeper-lock"
    ttl_ms: int = 10_000


@dataclass(frozen=True)
class KeeperResult:
    outcome: str
    round_id: int | None = None
    tx_hash: str | None = None
    error: str | None = None


def run_once(deps: KeeperDeps, now: datetime) -> KeeperResult:
    token = holder_id()
    try:
        taken = deps.redis.set(deps.lock_key, token, nx=True, px=deps.ttl_ms)
    except Exception as exc:  # Redis down: no lock, so no transaction
        return _done(deps, now, token, KeeperResult("redis_down", error=type(exc).__name__))
    if not taken:
        return _done(deps, now, token, KeeperResult("not_leader"))
    lock = HeldLock(deps.redis, deps.lock_key, token, deps.ttl_ms, _monotonic)
    HOLDER.labels(token.rsplit(":", 1)[0]).set(1)
    try:
        result = _act(deps, lock)
    except LockLost:
        result = KeeperResult("lock_lost")
    except DependencyUnavailable:
        # The node is down: the scheduler logs the outage (once, then every 30 s, then its
        # end), not a `keeper.failed` traceback per pass; no audit row per pass either.
        _done(deps, now, token, KeeperResult("node_down"))
        raise
    except Exception as exc:
        log.exception("keeper.failed", error=str(exc))
        result = KeeperResult("error", error=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        HOLDER.labels(token.rsplit(":", 1)[0]).set(0)
        with contextlib.suppress(Exception):  # Redis gone: the TTL frees it
            lock.release()
    return _done(deps, now, token, result)


def _act(deps: KeeperDeps, lock: HeldLock) -> KeeperResult:
    if _view(deps, "paused"):
        return KeeperResult("paused")
    pending = _pending(deps)
    if pending is not None:
        job_id, kind, round_id = pending
        return _send(deps, lock, kind, round_id, job_id, resumed=True)
    round_id = int(_view(deps, "currentRoundId"))
    if _view(deps, "isDrawReady"):
        return _send(deps, lock, DRAW, round_id, _key(deps, DRAW, round_id))
    if _view(deps, "isExpiredWithoutDraw"):
        return _send(deps, lock, CLOSE, round_id, _key(deps, CLOSE, round_id))
    return KeeperResult("idle", round_id)


def _key(deps: KeeperDeps, kind: str, round_id: int) -> str:
    """Scoped like the chain actions' job ids: `{KIND}-{chain_id}-{lottery}-{round}`."""
    return f"{kind}-{deps.chain_id}-{deps.lottery.lower()}-{round_id}"


def _send(
    deps: KeeperDeps,
    lock: HeldLock,
    kind: str,
    round_id: int,
    job_id: str,
    *,
    resumed: bool = False,
) -> KeeperResult:
    operator = deps.operator()
    if operator is None:
        return KeeperResult("no_operator", round_id, error="no operator wallet with a stored key")
    row = deps.journal.begin(
        job_id, type=kind, round_id=round_id, address=deps.lottery, chain_id=deps.chain_id,
        contract=deps.lottery,
    )  # fmt: skip
    if row.status in ("CONFIRMED", "ALREADY_DONE"):
        return KeeperResult("already_done", round_id, row.tx_hash)
    lock.renew(force=True)  # fencing: an expired holder stops here, before anything is sent
    stop = threading.Event()
    renewer = threading.Thread(target=_renew, args=(lock, stop), daemon=True)
    renewer.start()
    try:
        request = TxRequest(job_id, deps.lottery, encode_call(LOTTERY, _CALLS[kind]))
        outcome = deps.sender.execute(operator, request)
    finally:
        stop.set()
        renewer.join()
    common: dict[str, Any] = {"signer": operator.address, "tx_hash": outcome.tx_hash,
                              "gas_used": outcome.gas_used, "block_number": outcome.block_number}  # fmt: skip
    name = "draw_requested" if kind == DRAW else "round_closed"
    if outcome.recorded is not None:  # another holder settled this key first: nothing sent
        return KeeperResult("already_done", round_id, outcome.tx_hash)
    if outcome.confirmed:
        if not deps.journal.finish(job_id, "CONFIRMED", **common):
            # Another holder awaited the same transaction (split locks) and settled it first:
            # one transaction, so one `draw_requested` in the audit table.
            return KeeperResult("already_done", round_id, outcome.tx_hash)
        log.info("keeper." + name, round_id=round_id, tx_hash=outcome.tx_hash, resumed=resumed)
        return KeeperResult(name, round_id, outcome.tx_hash)
    error = outcome.revert.describe() if outcome.revert else "UNKNOWN_REVERT"
    code = outcome.revert.name if outcome.revert else "UNKNOWN_REVERT"
    deps.journal.finish(job_id, "FAILED", error_code=code, error=error, **common)
    log.warning("keeper.reverted", call=_CALLS[kind], round_id=round_id, error=error)
    return KeeperResult("reverted", round_id, outcome.tx_hash, error)


def _renew(lock: HeldLock, stop: threading.Event) -> None:
    while not stop.wait(lock.ttl_ms / 3000):
        try:
            lock.renew(force=True)
        except Exception:  # lost: the journal key still prevents a second transaction
            return


def _pending(deps: KeeperDeps) -> tuple[str, str, int] | None:
    with deps.connect() as conn:
        row = conn.execute(
            "SELECT job_id, type, round_id FROM chain_actions WHERE type IN (%s, %s)"
            " AND status = 'SENT' AND chain_id = %s AND contract = %s ORDER BY id LIMIT 1",
            (DRAW, CLOSE, deps.chain_id, deps.lottery),
        ).fetchone()
    return (str(row[0]), str(row[1]), int(row[2])) if row else None


def _view(deps: KeeperDeps, fn: str) -> Any:
    data = deps.client.call({"to": deps.lottery, "data": encode_call(LOTTERY, fn)})
    return decode_result(LOTTERY, fn, data)[0]


def _done(deps: KeeperDeps, now: datetime, token: str, result: KeeperResult) -> KeeperResult:
    RUNS.labels(result.outcome).inc()
    if result.outcome in _QUIET:
        return result
    try:
        with deps.connect() as conn:
            conn.execute(
                "INSERT INTO keeper_actions (chain_id, contract, ran_at, holder, outcome, round_id,"
                " tx_hash, error) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (deps.chain_id, deps.lottery, now, token, result.outcome, result.round_id,
                 result.tx_hash, result.error),
            )  # fmt: skip
    except Exception as exc:
        log.warning("keeper.record_failed", error=str(exc))
    return result


def _monotonic() -> float:
    import time

    return time.monotonic()
