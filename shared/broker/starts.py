"""A run's first start kept in Redis, on its job id's key, instead of a row written before it runs.

A send claims the job id's key with its message id as the value (`gate.py`). Once its producer
has inserted the run's QUEUED row new (not a job id whose run exists already: sent again past
the dedup window, say), `mark_fresh` says so on the key ("<message id>|fresh"). When a worker
takes a message whose key says fresh, `claim` records the start on that key ("<message id>|
<owner>|<lease until>|<started>", one script call, `lua/run_start.lua`) and the run goes on
without writing to Postgres: its start reaches `job_runs` in the statement that records its outcome
(`run_writer.FINISH_STARTED`), or, for a run that outlives `TRACKING_START_WRITE_AFTER_MS`, a
moment after it began (`middleware/tracking.py`). A later delivery of the same message (its
worker died, an acknowledgement was lost) finds the start on the key: live, it waits like any
delivery of a run in flight; its lease over, the start is put on the record as an interrupted
execution, and the run store decides from there (takeover, WORKER_CRASHED), as for any start.
docs/executions.md, "One durable write per short job", says what holds and why.

A worker thread claims its run's start itself, one script call (`lua/run_claim.lua`, which takes
many keys: gathering the process's claims through one thread, as the run writer gathers its
writes, measured no less CPU per job).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from .gate import dedup_key
from .scripts import source

SCRIPT = source("run_start.lua")
CLAIM = source("run_claim.lua")
FRESH = source("run_fresh.lua")


@dataclass(frozen=True, slots=True)
class PriorStart:
    """A start recorded on the key by an earlier delivery of this message."""

    #: The message whose delivery started it (a copy of the job may hold another id).
    message_id: str
    owner: str
    #: Epoch seconds: when its lease runs out, and when it began.
    lease_until: float
    started_at: float
    #: The day of the run's row (`created_on`, ISO), as its producer marked the key.
    created_on: str | None = None


@dataclass(frozen=True, slots=True)
class Kept:
    """A claim that kept the start: the day of the run's row (`created_on`, ISO)."""

    created_on: str


#: What a claim gives: `Kept` when the start is kept; a `PriorStart` when a delivery of this
#: message (or of the one holding the job id) kept one; else the key's value (the run store
#: decides), or None (no key).
Claimed = Kept | PriorStart | str | None


def claimed(reply: Any) -> Claimed:
    """A claim's reply read (`lua/run_claim.lua`)."""
    if not reply:
        return None
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    if text.startswith("+"):
        return Kept(text[1:])
    return prior_start(text) or text


class RunStarts:
    """The scripts on a job id's key, on the Redis client of the queue's server."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._shas: dict[str, str] = {}

    def _call(self, client: redis.Redis, job_id: str, *args: Any) -> Any:
        return self._eval(client, SCRIPT, 1, dedup_key(self.namespace, job_id), *args)

    def _eval(self, client: redis.Redis, script: str, keys: int, *args: Any) -> Any:
        sha = self._shas.get(script)
        if sha is None:
            sha = self._shas[script] = client.script_load(script)
        try:
            return client.evalsha(sha, keys, *args)
        except redis.exceptions.NoScriptError:  # a Redis restarted (or failed over) since
            self._shas[script] = client.script_load(script)
            return client.evalsha(self._shas[script], keys, *args)

    def claim_many(
        self,
        client: redis.Redis,
        runs: Sequence[tuple[str, str]],
        owner: str,
        *,
        now_ms: int,
        lease_ms: int,
    ) -> list[Claimed]:
        """Keep the starts of `runs` (job id, message id) whose keys say fresh; per run, as
        `claimed` reads the script's reply."""
        keys = [dedup_key(self.namespace, job_id) for job_id, _ in runs]
        replies = self._eval(
            client, CLAIM, len(keys), *keys, owner, now_ms, lease_ms, *(m for _, m in runs)
        )
        return [claimed(reply) for reply in replies]

    def written(self, client: redis.Redis, job_id: str, message_id: str, owner: str) -> None:
        """This message's start is now in `job_runs` (kept, then written; or written at once):
        the key says so ("<message id>|written"), and a later delivery asks the run store,
        whose lease is the one renewed from now on."""
        self._call(client, job_id, "written", message_id, owner)

    def mark_fresh(self, client: redis.Redis, runs: list[tuple[str, str, str]]) -> int:
        """Mark the keys of runs (job id, message id, the day of their row) whose QUEUED rows
        were just inserted new, all on one server, in one script call; returns how many."""
        if not runs:
            return 0
        keys = [dedup_key(self.namespace, job_id) for job_id, _, _ in runs]
        args = [value for _, message_id, day in runs for value in (message_id, day)]
        marked: int = self._eval(client, FRESH, len(keys), *keys, *args)
        return marked

    def cancel(self, client: redis.Redis, job_id: str) -> PriorStart | None:
        """Release the job id's key for a cancel, unless a start is recorded on it: then the
        run may be executing without a row that says so, and that start is returned."""
        reply = self._call(client, job_id, "cancel")
        if reply == 1 or not reply:
            return None
        return prior_start(reply)


def prior_start(value: bytes | str) -> PriorStart | None:
    """The start kept in a key's value, if one is (not a bare message id, not written)."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    parts = text.split("|")
    if len(parts) != 5:
        return None
    try:
        until, began = float(parts[2]) / 1000, float(parts[3]) / 1000
    except ValueError:
        return None
    return PriorStart(parts[0], parts[1], until, began, parts[4] or None)
