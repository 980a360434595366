"""The composition root of a chain-actions process: node client, signer locks, journal, keys.

Built on the first job (never at import time) and kept for the life of the process. The EVM
settings are the process's (`CHAIN_*`), unless a caller (a test) passes its own.
"""

from __future__ import annotations

import threading

from chain.abi import BADGE, LOTTERY
from chain.address import to_checksum_address
from chain.client import ChainClient
from chain.journal import ActionJournal
from chain.keys import Keyring
from chain.lock import SignerLocks, signer_lock_prefix
from chain.registry import contract_address
from chain.settings import ChainSettings, chain_settings
from chain.transactions import TxPolicy, TxSender
from shared import redis_conn
from shared.runtime import Runtime

from .domain import Collaborators
from .outage import OutagePolicy, Outages


def build(runtime: Runtime, chain: ChainSettings | None = None) -> Collaborators:
    settings = runtime.settings
    chain = chain or chain_settings()
    client = ChainClient.connect(chain.rpc_url, timeout_s=chain.rpc_timeout_s)
    chain_id = client.check_chain(chain.chain_id)
    journal = ActionJournal(runtime.pool.connection)
    locks = SignerLocks(
        redis_conn.client(settings, socket_timeout=5),
        chain_id=chain_id,
        ttl_ms=chain.signer_lock_ttl_ms,
        wait_ms=chain.signer_lock_wait_ms,
        prefix=signer_lock_prefix(settings.broker_namespace),
    )
    overrides = {LOTTERY: chain.lottery_address, BADGE: chain.badge_address}

    # Read per action (one indexed row), never cached for the life of the process: a
    # redeployment recorded by `fleet chain deploy` is used by the next action.
    def address_of(name: str) -> str:
        with runtime.pool.connection() as conn:
            return contract_address(conn, chain_id, name, override=overrides.get(name))

    def known_lottery(address: str) -> bool:
        with runtime.pool.connection() as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM lottery_rounds WHERE chain_id = %s AND contract = %s LIMIT 1",
                    (chain_id, address),
                ).fetchone()
                is not None
            )

    def holds_ticket(lottery: str, round_id: int, player: str) -> bool:
        with runtime.pool.connection() as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM lottery_tickets WHERE chain_id = %s AND contract = %s"
                    " AND round_id = %s AND player = %s LIMIT 1",
                    (chain_id, lottery, round_id, to_checksum_address(player)),
                ).fetchone()
                is not None
            )

    return Collaborators(
        sender=TxSender(client, locks, journal, TxPolicy.from_settings(chain)),
        journal=journal,
        connect=runtime.pool.connection,
        keyring=Keyring.from_settings(chain.keks, chain.kek_id),
        chain_id=chain_id,
        contract_address=address_of,
        known_lottery=known_lottery,
        holds_ticket=holds_ticket,
        wait_s=chain.await_in_worker_s,
    )


_lock = threading.Lock()
_built: dict[int, Collaborators] = {}


def for_runtime(runtime: Runtime) -> Collaborators:
    """This process's collaborators (one set per runtime), built on first use."""
    key = id(runtime)
    if key not in _built:
        with _lock:
            if key not in _built:
                _built[key] = build(runtime)
    return _built[key]


_outages: dict[int, Outages] = {}


def outages(runtime: Runtime) -> Outages:
    """Where this process keeps each action's node outage (Redis; needs no node to be built)."""

    key = id(runtime)
    if key not in _outages:
        with _lock:
            if key not in _outages:
                settings = runtime.settings
                _outages[key] = Outages(
                    redis_conn.client(settings, socket_timeout=5),
                    settings.broker_namespace,
                    OutagePolicy.from_settings(chain_settings()),
                )
    return _outages[key]
