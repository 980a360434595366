"""The keyset pages of the job-status API and of the console: newest first on `(queued_at, id)`
(the run's 16-byte id breaks the ties of an instant: migration 0021_run_index_ids), each run
once; a cursor handed out before, which names its page's last run by job id, still goes on
where that page ended.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg

from shared.api import queries
from shared.console import search
from shared.runtime import Runtime

#: Runs of one org, four to an instant: most of a page's ends fall inside a tie.
RUNS = """
INSERT INTO job_runs (org_id, job_name, job_id, queue, status, queued_at)
SELECT %(org)s, 'cursor.job', 'cursor:' || g, 'default', 'COMPLETED',
       %(at)s - (g / 4) * interval '1 s'
  FROM generate_series(1, 22) AS g
"""
ORDERED = (
    "SELECT job_id, queued_at FROM job_runs WHERE org_id = %s ORDER BY queued_at DESC, id DESC"
)

Page = Callable[[str | None], tuple[list[str], str | None]]


def _api(runtime: Runtime, org: uuid.UUID) -> Page:
    def read(cursor: str | None) -> tuple[list[str], str | None]:
        runs, nxt = queries.page(
            runtime, org_id=org, filters=queries.Filters(), limit=3, cursor=cursor
        )
        return [r.job_id for r in runs], nxt

    return read


def _console(runtime: Runtime, org: uuid.UUID) -> Page:
    flt = search.RunFilter.parse({"org_id": str(org)})

    def read(cursor: str | None) -> tuple[list[str], str | None]:
        rows, nxt = search.page(runtime, flt, limit=3, cursor=cursor)
        return [r["job_id"] for r in rows], nxt

    return read


def _every_page(read: Page, cursor: str | None = None) -> list[str]:
    seen, first = [], True
    while first or cursor:
        found, cursor = read(cursor)
        seen += found
        first = False
    return seen


def _old_cursor(queued_at: datetime, job_id: str) -> str:
    """A cursor as this API wrote it before 0021_run_index_ids: `[queued_at, job_id]`."""
    raw = json.dumps([queued_at.isoformat(), job_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _fill(db: psycopg.Connection[Any]) -> tuple[uuid.UUID, list[tuple[str, datetime]]]:
    org = uuid.uuid4()
    at = db.execute("SELECT date_trunc('second', now())").fetchone()[0]  # type: ignore[index]
    db.execute(RUNS, {"org": org, "at": at})
    return org, db.execute(ORDERED, (org,)).fetchall()


def test_the_pages_list_each_run_once_newest_first_through_the_ties(
    runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org, ordered = _fill(db)
    assert len({at for _, at in ordered}) < len(ordered)  # ties there are

    for read in (_api(runtime, org), _console(runtime, org)):
        assert _every_page(read) == [job_id for job_id, _ in ordered]


def test_a_cursor_naming_a_job_id_goes_on_after_its_run(
    runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org, ordered = _fill(db)
    # The last run of a page that ends inside a tie (its instant's next run follows it).
    k = next(i for i in range(1, len(ordered) - 1) if ordered[i][1] == ordered[i + 1][1])
    job_id, at = ordered[k]
    old = _old_cursor(at, job_id)

    for read in (_api(runtime, org), _console(runtime, org)):
        assert _every_page(read, old) == [j for j, _ in ordered[k + 1 :]]


def test_a_cursor_naming_a_job_id_gone_lists_its_instant_again_rather_than_skip(
    runtime: Runtime, db: psycopg.Connection[Any]
) -> None:
    org, ordered = _fill(db)
    k = next(i for i in range(1, len(ordered) - 1) if ordered[i][1] == ordered[i + 1][1])
    job_id, at = ordered[k]
    db.execute("DELETE FROM job_runs WHERE job_id = %s", (job_id,))
    instant = next(i for i, (_, t) in enumerate(ordered) if t == at)

    for read in (_api(runtime, org), _console(runtime, org)):
        assert _every_page(read, _old_cursor(at, job_id)) == [
            j for j, _ in ordered[instant:] if j != job_id
        ]
