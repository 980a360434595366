"""`GET /jobs/{job_id}/events`: a job's status and progress as Server-Sent Events.

The stream polls the run's row (a primary-key read) every `interval` seconds and sends an event
when status, attempt, progress or error code change, then closes after the first terminal state
(COMPLETED, DEAD, CANCELED). A comment line every `keepalive` seconds keeps proxies from closing
an idle stream.

Each event's `id:` is the run's version (`job_runs.version`, bumped on every write of the run),
so ids only grow, across connections too. A browser's `EventSource` reconnects by itself after a
network cut and sends the last id it saw as `Last-Event-ID`: the stream then resumes after it
(the current state only if it is newer), and answers `204 No Content` (which tells
`EventSource` to stop reconnecting) when that event was already the terminal one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from ..runtime import Runtime
from .models import TERMINAL, JobEvent, JobStatus, Progress
from .queries import state


def _event(row: dict[str, Any]) -> JobEvent:
    status = JobStatus(row["status"])
    progress = row["progress"]
    return JobEvent(
        job_id=row["job_id"],
        status=status,
        attempt=row["attempt"],
        progress=Progress(**progress) if progress else None,
        error_code=row["error_code"],
        terminal=status in TERMINAL,
    )


def format_sse(event: JobEvent, *, event_id: int) -> str:
    return f"id: {event_id}\nevent: status\ndata: {event.model_dump_json()}\n\n"


def stream(
    runtime: Runtime,
    job_id: str,
    *,
    org_id: UUID,
    interval: float = 0.5,
    keepalive: float = 15.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    after: int | None = None,
) -> Iterator[str]:
    """`after`: the client's `Last-Event-ID`; states up to that version are not sent again."""
    last: str | None = None
    last_sent = clock()
    while True:
        row = state(runtime, job_id, org_id=org_id)
        if row is None:  # purged (retention) or released while followed
            yield f"event: gone\ndata: {json.dumps({'job_id': job_id})}\n\n"
            return
        event = _event(row)
        key = event.model_dump_json()
        version = int(row["version"])
        if key != last and (after is None or version > after):
            last, last_sent = key, clock()
            yield format_sse(event, event_id=version)
            if event.terminal:
                return
        elif key != last:  # the client saw this state before it reconnected
            last = key
        elif clock() - last_sent >= keepalive:
            last_sent = clock()
            yield ": keep-alive\n\n"
        sleep(interval)
