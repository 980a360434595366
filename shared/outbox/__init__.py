"""Transactional outbox: a job born in the caller's transaction, published after its commit.

`enqueue(session, job, payload)` (`stage.py`) adds, to the caller's SQLAlchemy transaction, an
`outbox_events` row and the job's run (`job_runs`, status STAGED): no commit, no job and no
trace; from the commit on, the job is known to the status API, SSE, the CLI and the console.
The relay (`relay.py`) publishes it through the normal producer path; `at_commit=True` (the
clients' `via="send"`) also publishes it from the caller's process right after its commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .stage import CHANNEL, Via, enqueue, stage

if TYPE_CHECKING:
    from .relay import RelayStats, relay_id, relay_once, run_relay

#: Loaded on first use (PEP 562): a producer that stages a job loads no relay (psycopg, metrics).
_RELAY = frozenset({"RelayStats", "relay_id", "relay_once", "run_relay"})


def __getattr__(name: str) -> Any:
    if name in _RELAY:
        from . import relay

        return getattr(relay, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CHANNEL",
    "RelayStats",
    "Via",
    "enqueue",
    "relay_id",
    "relay_once",
    "run_relay",
    "stage",
]
