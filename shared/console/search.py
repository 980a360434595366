"""The Runs and Dead-letters searches: filters, keyset pages, and one run with its history.

Newest first on `(queued_at, id)`; the cursor is the last row's key (the job-status API's
own cursor format), so a page costs an index range scan however deep it is: migration
`0013_console` gives each leading filter its index (ties broken by the run's 16-byte id since
0021_run_index_ids; a cursor of the job id form is still read). A console restricted to some orgs adds
`org_id = ANY(...)` to every read, and a run of another org is "no run".

The search line (`q`, `query.py`) adds conditions on the payload and the error text, answered
by inverted indexes (migration 0017_console_search). How many runs such a condition matches is
unknown to the planner, so a read probes each first (`_plan`, `FUZZY_PROBE`): few matches are
read through the inverted index and sorted, many are found sooner by walking the runs newest
first and filtering.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from ..api.queries import after, decode_cursor, encode_cursor
from ..jobs.runs import RunView
from ..jobs.statuses import RUN_STATUSES
from ..observability.logging import redact
from ..runtime import Runtime
from . import query as syntax

#: What a list shows of a run (payloads and results only on a run's page).
LIST_COLUMNS = (
    "id, job_id, org_id, job_name, queue, status, entity_type, entity_id, error_code, attempt,"
    " max_attempts, request_id, queued_at, started_at, finished_at, replay_count"
)
STATUSES = RUN_STATUSES
#: The Runs page's search (its line and its form's fields), which a bulk action's form carries
#: back as `f_<name>`.
SEARCH_FIELDS = ("q", "org_id", "job_name", "status", "entity_id", "request_id", "since", "until")


class BadFilter(ValueError):
    """A filter the console cannot read (a malformed org id, date, cursor or search line)."""


#: A payload or error-text condition that matches fewer runs than this is read through its
#: inverted index (then sorted); one that matches more, by walking the runs in order and
#: filtering (its matches are dense: a page is found within a few thousand rows).
FUZZY_PROBE = 5000


@dataclass(frozen=True)
class RunFilter:
    org_id: UUID | None = None
    job_name: str | None = None
    status: str | None = None
    queue: str | None = None
    entity_id: str | None = None
    request_id: str | None = None
    error_code: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    #: The search line (`query.py`).
    q: str | None = None

    @classmethod
    def parse(cls, query: dict[str, str], *, status: str | None = None) -> RunFilter:
        """From a query string: empty values are no filter."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = (query.get(f.name) or "").strip()
            if not raw:
                continue
            try:
                if f.name == "org_id":
                    values[f.name] = UUID(raw)
                elif f.name in ("since", "until"):
                    at = datetime.fromisoformat(raw)  # the form's local time is UTC (as shown)
                    values[f.name] = at if at.tzinfo else at.replace(tzinfo=UTC)
                elif f.name == "status":
                    if raw.upper() not in STATUSES:
                        raise ValueError(f"unknown status {raw!r}")
                    values[f.name] = raw.upper()
                elif f.name == "q":
                    syntax.compile(raw)  # read now: a malformed line is the operator's to fix
                    values[f.name] = raw
                else:
                    values[f.name] = raw
            except syntax.BadQuery as exc:
                raise BadFilter(f"search: {exc}") from exc
            except ValueError as exc:
                raise BadFilter(f"{f.name}: {exc}") from exc
        if status is not None:
            values["status"] = status
        return cls(**values)

    def where(
        self, orgs: tuple[UUID, ...], frequent: frozenset[int] = frozenset()
    ) -> tuple[list[str], list[Any]]:
        """SQL conditions and parameters; `frequent`: the search line's payload or error-text
        conditions to write so that no index answers them (`_plan`)."""
        where: list[str] = []
        params: list[Any] = []
        for name in (
            "org_id",
            "job_name",
            "status",
            "queue",
            "entity_id",
            "request_id",
            "error_code",
        ):
            value = getattr(self, name)
            if value is not None:
                where.append(f"{name} = %s")
                params.append(value)
        if self.since is not None:
            where.append("queued_at >= %s")
            params.append(self.since)
        if self.until is not None:
            where.append("queued_at < %s")
            params.append(self.until)
        if self.q:
            more, more_params = syntax.compile(self.q).sql(frequent)
            where.extend(more)
            params.extend(more_params)
        if orgs:
            where.append("org_id = ANY(%s)")
            params.append(list(orgs))
        return where or ["TRUE"], params


#: How long a probe's answer is reused: how many runs a term matches changes slowly, and an
#: operator pages through a search, or its page is polled (a probe costs 10-80 ms on 1M runs).
PROBE_TTL_S = 60.0
_probed: dict[tuple[str, str], tuple[float, bool]] = {}


def _frequent(conn: Any, condition: syntax.Condition) -> bool:
    """Whether `condition` matches at least `FUZZY_PROBE` runs (read through its index)."""
    key = (condition.sql, repr(condition.params))
    now = time.monotonic()
    cached = _probed.get(key)
    if cached is not None and now - cached[0] < PROBE_TTL_S:
        return cached[1]
    row = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE {condition.sql} LIMIT %s) AS m",
        [*condition.params, FUZZY_PROBE],
    ).fetchone()
    found = row is not None and row[0] >= FUZZY_PROBE
    if len(_probed) >= 512:
        _probed.clear()
    _probed[key] = (now, found)
    return found


def _plan(conn: Any, flt: RunFilter) -> frozenset[int]:
    """Within the caller's transaction: which of the search line's payload or error-text
    conditions match many runs (at least `FUZZY_PROBE`, each probed through its index). Those
    are written so that no index answers them when another one is rare (which leads); when
    every one is frequent, bitmap scans are off for the transaction instead, so that the runs
    are walked in order and filtered."""
    if not flt.q:
        return frozenset()
    compiled = syntax.compile(flt.q)
    frequent = {i for i in compiled.fuzzy if _frequent(conn, compiled.conditions[i])}
    if frequent and frequent == set(compiled.fuzzy):
        # Every one is frequent: kept as written (the planner estimates them from the column's
        # statistics, which it cannot for the rewritten form) with no bitmap scan, so that the
        # runs are walked in order, newest first.
        conn.execute("SET LOCAL enable_bitmapscan = off")
        return frozenset()
    return frozenset(frequent)


def page(
    runtime: Runtime,
    flt: RunFilter,
    *,
    orgs: tuple[UUID, ...] = (),
    limit: int = 50,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    try:
        start = after(decode_cursor(cursor)) if cursor else None
    except ValueError as exc:
        raise BadFilter(str(exc)) from exc
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        where, params = flt.where(orgs, _plan(conn, flt))
        if start:
            where.append(start[0])
            params.extend(start[1])
        sql = (
            f"SELECT {LIST_COLUMNS} FROM job_runs WHERE {' AND '.join(where)}"
            " ORDER BY queued_at DESC, id DESC LIMIT %s"
        )
        rows = cur.execute(sql, [*params, limit + 1]).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = encode_cursor(rows[-1]["queued_at"], rows[-1]["id"]) if more and rows else None
    return rows, nxt


def count(
    runtime: Runtime, flt: RunFilter, *, orgs: tuple[UUID, ...] = (), cap: int = 100_000
) -> int:
    """How many runs match (at most `cap`: a dry run's figure, bounded in cost)."""
    where, params = flt.where(orgs)
    with runtime.pool.connection() as conn:
        row = conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE {' AND '.join(where)} LIMIT %s) AS m",
            [*params, cap],
        ).fetchone()
    return int(row[0]) if row else 0


def matching_ids(
    runtime: Runtime, flt: RunFilter, *, orgs: tuple[UUID, ...] = (), limit: int
) -> list[tuple[str, UUID]]:
    with runtime.pool.connection() as conn:
        where, params = flt.where(orgs, _plan(conn, flt))
        rows = conn.execute(
            f"SELECT job_id, org_id FROM job_runs WHERE {' AND '.join(where)}"
            " ORDER BY queued_at, id LIMIT %s",
            [*params, limit],
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


def run_detail(
    runtime: Runtime, job_id: str, *, orgs: tuple[UUID, ...] = ()
) -> dict[str, Any] | None:
    """One run as its page shows it: every field (payload, result, checkpoint redacted), its
    executions (each start: worker, attempt, time) and its replays (who, when, what error)."""
    from ..jobs import runs

    run: RunView | None = runs.find(job_id, org_id=None, runtime=runtime)
    if run is None or (orgs and run.org_id not in orgs):
        return None
    data = dict(run.__dict__)
    for name in ("payload", "result", "checkpoint", "error"):
        data[name] = redact(data[name])
    with runtime.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        executions = cur.execute(
            "SELECT execution, attempt, worker, message_id, started_at FROM job_executions"
            " WHERE job_id = %s ORDER BY execution",
            (job_id,),
        ).fetchall()
        replays = cur.execute(
            "SELECT replayed_at, replayed_by, previous_error_code, previous_error, previous_attempt"
            " FROM job_replays WHERE job_id = %s ORDER BY replayed_at",
            (job_id,),
        ).fetchall()
    return {"run": data, "executions": executions, "replays": redact(replays)}


def facets(runtime: Runtime, *, error_codes: bool = False) -> dict[str, list[str]]:
    """The choices of the filter forms: job names and queues of the catalog, and (dead letters)
    the error codes of the latest 5,000 dead runs (`ix_job_runs_console_dead` alone)."""
    from ..jobs import catalog

    codes: list[tuple[str]] = []
    if error_codes:
        with runtime.pool.connection() as conn:
            codes = conn.execute(
                "SELECT DISTINCT error_code FROM (SELECT error_code FROM job_runs"
                " WHERE status = 'DEAD' ORDER BY queued_at DESC, id DESC LIMIT 5000) AS d"
                " WHERE error_code IS NOT NULL ORDER BY 1"
            ).fetchall()
    return {
        "job_names": sorted(catalog.BY_NAME),
        "queues": list(catalog.QUEUES),
        "error_codes": [c[0] for c in codes],
        "statuses": list(STATUSES),
    }
