"""The scheduler's part of the operator console (`shared/console/plugins.py`; its registration's
`console`): the Chain page (chain actions by type and status and the latest ones, the keeper's
last passes, the indexer's lag) and the indexer's card on the Overview.

Chain actions and the keeper act for no tenant (DESIGN §2): a console restricted to some orgs
(`CONSOLE_ORGS`) does not show them. The indexer's lag is a fleet-wide figure, shown on the
Overview to every operator like the queues. The node's head (an HTTP call to
`CHAIN_RPC_URL`) is cached a few seconds so that a slow node does not slow the pages. The
`chain_actions` table is the chain worker's: it is read here with SQL only.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations.
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from chain.settings import ChainSettings
from shared.config import settings_for
from shared.console.plugins import Con, Op, Panel, guard, present, rows
from shared.runtime import Runtime

from .chain.reconcile import reorg_status

NAME = "scheduler"
TEMPLATES = Path(__file__).parent / "templates" / "console"
NAV = (("chain", "Chain", "/chain"),)
router = APIRouter()


@router.get("/chain", response_class=HTMLResponse)
def chain(request: Request, con: Con, op: Op) -> HTMLResponse:
    rt = con.runtime()
    have = present(rt, "chain_actions", "keeper_actions")
    # Chain actions act for no tenant (DESIGN §2): operators of every org only.
    shown = not op.restricted
    return con.render(
        request, op, "scheduler/chain.html", page="chain", restricted=op.restricted,
        counts=action_counts(rt) if shown and have["chain_actions"] else None,
        actions=actions(rt) if shown and have["chain_actions"] else None,
        keeper=keeper(rt) if shown and have["keeper_actions"] else None,
        reorged=guard(lambda: reorged(rt)) if shown and have["chain_actions"] else None,
        indexer=guard(lambda: indexer(rt)),
    )  # fmt: skip


def overview_panel(runtime: Runtime, orgs: Sequence[UUID]) -> Panel:
    """The indexer's lag (fleet-wide, read-only: shown to every operator)."""
    return "scheduler/indexer.html", {"i": guard(lambda: indexer(runtime))}


# -- reads -------------------------------------------------------------------------------------


def actions(runtime: Runtime, *, limit: int = 50) -> list[dict[str, Any]]:
    return rows(
        runtime,
        "SELECT job_id, type, round_id, address, status, nonce, tx_hash, error_code, error, attempts,"
        " created_at, updated_at, confirmed_at FROM chain_actions ORDER BY updated_at DESC LIMIT %s",
        [limit],
    )


def action_counts(runtime: Runtime) -> list[dict[str, Any]]:
    return rows(
        runtime,
        "SELECT type, status, count(*) AS n FROM chain_actions GROUP BY 1, 2 ORDER BY 1, 2",
        [],
    )


def reorged(runtime: Runtime) -> dict[str, Any]:
    """Settled actions a reorg removed: how many were re-sent, and a warning while some are
    not settled again (`fleet chain status` shows the same)."""
    with runtime.pool.connection() as conn:
        return reorg_status(conn, None)


def keeper(runtime: Runtime, *, limit: int = 20) -> list[dict[str, Any]]:
    return rows(
        runtime,
        "SELECT ran_at, chain_id, contract, holder, outcome, round_id, tx_hash, error"
        " FROM keeper_actions ORDER BY ran_at DESC LIMIT %s",
        [limit],
    )


class _Cached:
    """One value recomputed at most every `ttl` seconds (a slow source, read in the page)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._at = -ttl
        self._value: Any = None
        self._lock = threading.Lock()

    def get(self, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if time.monotonic() - self._at >= self.ttl:
                self._value = guard(compute)
                self._at = time.monotonic()
            return self._value


_HEAD = _Cached(ttl=5.0)


def _head(url: str) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []})
    request = urllib.request.Request(
        url, data=body.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=0.5) as response:
        return int(json.loads(response.read())["result"], 16)


def indexer(runtime: Runtime) -> dict[str, Any]:
    """The newest cursor of the indexer, the node's head and the lag between them."""
    with runtime.pool.connection() as conn:
        exists = conn.execute("SELECT to_regclass('chain_cursor')").fetchone()
        if not exists or exists[0] is None:
            return {"note": "no chain tables (not migrated)"}
        row = conn.execute(
            "SELECT chain_id, block_number, updated_at FROM chain_cursor ORDER BY updated_at DESC LIMIT 1"
        ).fetchone()
    if row is None:
        return {"note": "the indexer has no cursor yet"}
    head = _HEAD.get(lambda: _head(settings_for(ChainSettings).rpc_url))
    if isinstance(head, dict):
        return {"chain_id": row[0], "cursor": row[1], "updated_at": row[2], "head": None,
                "lag": None, "note": f"node: {head['error']}"}  # fmt: skip
    return {"chain_id": row[0], "cursor": row[1], "updated_at": row[2], "head": head,
            "lag": max(0, head - int(row[1]))}  # fmt: skip
