"""The scheduler's chain jobs: composition of the indexer's and keeper's collaborators, and the
two periodic functions the schedule table runs (`index`, `keep`).

Collaborators are built on the first pass (never at import time) and kept per runtime; a node
that does not answer, or contracts not deployed yet, make the pass a no-op that says so once
and try again at the next tick. Their settings are the process's (`ChainConfig.current()`:
`CHAIN_*`, `INDEXER_*`, `KEEPER_*`) unless a caller (a test, a bench) passes its own.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from chain.abi import BADGE, LOTTERY
from chain.client import ChainClient
from chain.errors import ContractNotDeployed, RpcUnavailable
from chain.journal import ActionJournal
from chain.keys import Keyring
from chain.lock import SignerLocks, signer_lock_prefix
from chain.registry import contract_address, deployments
from chain.settings import ChainSettings, chain_settings
from chain.transactions import TxPolicy, TxSender
from chain.wallets import load_operator
from shared import redis_conn
from shared.jobs import runs
from shared.runtime import Runtime

from ..settings import (
    IndexerSettings,
    KeeperSettings,
    indexer_settings,
    keeper_settings,
    scheduler_settings,
)
from .genesis import check_genesis
from .indexer import IndexerConfig, SyncResult, sync_once
from .keeper import KeeperDeps, KeeperResult, lock_ttl_ms, run_once

log = structlog.get_logger("jobfleet.scheduler.chain")


@dataclass(frozen=True)
class ChainConfig:
    """The settings the chain jobs are built from."""

    chain: ChainSettings
    indexer: IndexerSettings
    keeper: KeeperSettings

    @classmethod
    def current(cls) -> ChainConfig:
        """The process's (read from the environment once)."""
        return cls(chain_settings(), indexer_settings(), keeper_settings())


@dataclass
class ChainJobs:
    indexer: IndexerConfig
    client: ChainClient
    keeper: KeeperDeps
    config: ChainConfig


def build(runtime: Runtime, config: ChainConfig | None = None) -> ChainJobs:
    s = runtime.settings
    config = config or ChainConfig.current()
    chain, indexing, keeping = config.chain, config.indexer, config.keeper
    # Is a node there? Asked with a short timeout: a node that accepts and never answers would
    # hold every chain job (and a SIGTERM) for the whole request timeout on each pass.
    probe = ChainClient.connect(chain.rpc_url, timeout_s=min(chain.rpc_timeout_s, PROBE_TIMEOUT_S))
    chain_id = probe.check_chain(chain.chain_id)
    client = ChainClient.connect(chain.rpc_url, timeout_s=chain.rpc_timeout_s)
    with runtime.pool.connection() as conn:
        reset = check_genesis(conn, client, chain_id)
    if reset is not None and reset.archived:
        runtime.sender.gate.forget(reset.archived)  # the new chain's round 1 may be sent again
    with runtime.pool.connection() as conn:
        lottery = contract_address(conn, chain_id, LOTTERY, override=chain.lottery_address)
        badge = contract_address(conn, chain_id, BADGE, override=chain.badge_address)
        recorded = deployments(conn, chain_id).get(LOTTERY)
    start = indexing.start_block
    if start is None:
        start = recorded.block_number if recorded and recorded.block_number is not None else 0
    indexer = IndexerConfig(
        chain_id=chain_id,
        lottery=lottery,
        badge=badge,
        start_block=start,
        confirmations=chain.confirmations,
        window=indexing.window_blocks,
        budget_s=indexing.tick_budget_s,
        hash_depth=indexing.hash_depth,
    )
    redis_client = redis_conn.client(s, socket_timeout=2, socket_connect_timeout=2)
    journal = ActionJournal(runtime.pool.connection)
    locks = SignerLocks(
        redis_client,
        chain_id=chain_id,
        ttl_ms=chain.signer_lock_ttl_ms,
        wait_ms=chain.signer_lock_wait_ms,
        prefix=signer_lock_prefix(s.broker_namespace),
    )
    keyring = Keyring.from_settings(chain.keks, chain.kek_id)

    def operator() -> Any:
        with runtime.pool.connection() as conn:
            return load_operator(conn, keyring)

    keeper = KeeperDeps(
        redis=redis_client,
        client=client,
        sender=TxSender(client, locks, journal, TxPolicy.from_settings(chain)),
        journal=journal,
        connect=runtime.pool.connection,
        chain_id=chain_id,
        lottery=lottery,
        operator=operator,
        lock_key=keeping.lock_key,
        ttl_ms=lock_ttl_ms(keeping.interval_ms),
    )
    return ChainJobs(indexer, client, keeper, config)


_lock = threading.Lock()
#: The timeout of the "is a node there?" request when the chain jobs are built.
PROBE_TIMEOUT_S = 2.0
#: After a failed build, how long the chain jobs wait before asking the node again.
RETRY_AFTER_S = 2.0
#: runtime id -> (runtime, when the next build may be tried) after a failed build.
_failed: dict[int, tuple[Runtime, float]] = {}
_built: dict[int, tuple[Runtime, ChainJobs]] = {}
_said: set[tuple[int, str]] = set()


def _redeployed(runtime: Runtime, jobs: ChainJobs) -> bool:
    """Were other contracts recorded for this chain since the jobs were built (`fleet chain
    deploy` while the scheduler runs)? One indexed query per pass."""
    chain = jobs.config.chain
    if chain.lottery_address and chain.badge_address:
        return False
    with runtime.pool.connection() as conn:
        recorded = {name: d.address for name, d in deployments(conn, jobs.indexer.chain_id).items()}
    now = (
        chain.lottery_address or recorded.get(LOTTERY, jobs.indexer.lottery),
        chain.badge_address or recorded.get(BADGE, jobs.indexer.badge),
    )
    if (now[0].lower(), now[1].lower()) == (
        jobs.indexer.lottery.lower(),
        jobs.indexer.badge.lower(),
    ):
        return False
    log.info("scheduler.chain_redeployed", lottery=now[0], badge=now[1])
    return True


def jobs_for(runtime: Runtime, config: ChainConfig | None = None) -> ChainJobs | None:
    """This runtime's chain collaborators; None (said once) while the chain is not configured.
    Built again when `fleet chain deploy` recorded other contracts for the chain."""
    key = id(runtime)
    with _lock:
        if key in _built and _built[key][0] is runtime and _redeployed(runtime, _built[key][1]):
            del _built[key]
        if key not in _built or _built[key][0] is not runtime:  # ids are reused after a close
            failed = _failed.get(key)
            if failed is not None and failed[0] is runtime and time.monotonic() < failed[1]:
                return None  # the other chain job found no chain a moment ago: not again yet
            try:
                _built[key] = (runtime, build(runtime, config))
                _failed.pop(key, None)
            except (ContractNotDeployed, RpcUnavailable) as exc:
                _failed[key] = (runtime, time.monotonic() + RETRY_AFTER_S)
                # Said once per cause: a fleet without a chain must not log every 3 s.
                if (key, type(exc).__name__) not in _said:
                    _said.add((key, type(exc).__name__))
                    log.warning("scheduler.chain_not_ready", reason=str(exc))
                return None
        return _built[key][1]


def forget(runtime: Runtime) -> None:
    with _lock:
        _built.pop(id(runtime), None)
        _failed.pop(id(runtime), None)


def index(runtime: Runtime, now: datetime) -> SyncResult | None:
    """One indexer pass (every `INDEXER_INTERVAL_MS`)."""
    if not scheduler_settings().chain_enabled:
        return None
    jobs = jobs_for(runtime)
    if jobs is None:
        return None

    def cancel(job_id: str) -> str:
        return runs.cancel(job_id, org_id=None, runtime=runtime)

    result = sync_once(
        jobs.client,
        runtime.sessions,
        jobs.indexer,
        cancel=cancel,
        release=runtime.sender.gate.forget,
    )
    if result.blocks or result.reorgs:
        log.info(
            "indexer.synced",
            blocks=result.blocks,
            logs=result.logs,
            actions=len(result.actions),
            reorgs=len(result.reorgs),
            cursor=result.cursor,
            head=result.head,
        )
    return result


def keep(runtime: Runtime, now: datetime) -> KeeperResult | None:
    """One keeper pass (every `KEEPER_INTERVAL_MS`)."""
    if not scheduler_settings().chain_enabled:
        return None
    jobs = jobs_for(runtime)
    if jobs is None:
        return None
    return run_once(jobs.keeper, now)
