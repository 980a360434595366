"""Transactional outbox: a job born in the caller's transaction, published after its commit.

`enqueue(session, job, payload)` (`stage.py`) adds, to the caller's SQLAlchemy transaction, an
`outbox_events` row and the job's run (`job_runs`, status STAGED): no commit, no job and no
trace; from the commit on, the job is known to the status API, SSE, the CLI and the console.
The relay (`relay.py`) publishes it through the normal producer path; `at_commit=True` (the
clients' `via="send"`) also publishes it from the caller's process right after its commit.
"""

from __future__ import annotations

from .relay import RelayStats, relay_id, relay_once, run_relay
from .stage import CHANNEL, Via, enqueue, stage

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
