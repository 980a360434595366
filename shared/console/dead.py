"""Dead letters from the console: replay one run, a selection or every run of a filter, purge.

A bulk action is shown first as a dry run (how many runs, which filter) and happens only when
the operator confirms it. Replays go through `shared.dlq.replay` (the CLI's path: the same job
id, attempts reset, `job_replays` audit with the operator's name); each console action is also
recorded in `console_audit`. A console restricted to some orgs acts only on their runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from .. import dlq
from ..errors import FleetError
from ..runtime import Runtime
from . import audit, search
from .security import Operator

#: Most runs one bulk action touches (the rest stay for the next one).
BULK_LIMIT = 1000


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _scope(operator: Operator) -> tuple[UUID, ...]:
    return operator.orgs


def selected(
    runtime: Runtime, job_ids: Sequence[str], operator: Operator
) -> list[tuple[str, UUID]]:
    """The DEAD runs among `job_ids` this operator may act on (others are ignored)."""
    if not job_ids:
        return []
    sql = "SELECT job_id, org_id FROM job_runs WHERE job_id = ANY(%s) AND status = 'DEAD'"
    params: list[object] = [list(job_ids)]
    if operator.orgs:
        sql += " AND org_id = ANY(%s)"
        params.append(list(operator.orgs))
    with runtime.pool.connection() as conn:
        return [(r[0], r[1]) for r in conn.execute(sql + " ORDER BY queued_at", params).fetchall()]


def targets(
    runtime: Runtime,
    operator: Operator,
    *,
    job_ids: Sequence[str] = (),
    flt: search.RunFilter | None = None,
) -> list[tuple[str, UUID]]:
    if flt is not None:
        dead = search.RunFilter(**{**flt.__dict__, "status": "DEAD"})
        return search.matching_ids(runtime, dead, orgs=_scope(operator), limit=BULK_LIMIT)
    return selected(runtime, job_ids, operator)


def replay(
    runtime: Runtime,
    runs: Sequence[tuple[str, UUID]],
    operator: Operator,
    *,
    client: str | None,
    what: str,
    states: Sequence[str] = ("DEAD",),
) -> Outcome:
    """Replay these runs (those still in `states` now), audited once."""
    outcome = Outcome()
    for job_id, org_id in runs:
        try:
            # Scoped to the run's own org: a restricted operator's runs were filtered already.
            dlq.replay(job_id, org_id=org_id, by=operator.name, runtime=runtime, states=states)
            outcome.done.append(job_id)
        except FleetError as exc:
            outcome.failed[job_id] = f"{exc.code}: {exc}"
    audit.record(
        runtime,
        actor=operator.name,
        action="replay",
        target=what,
        count=len(outcome.done),
        detail={"job_ids": outcome.done[:50], "failed": dict(list(outcome.failed.items())[:20])},
        client=client,
    )
    return outcome


def purge(
    runtime: Runtime,
    runs: Sequence[tuple[str, UUID]],
    operator: Operator,
    *,
    client: str | None,
    what: str,
    states: Sequence[str] = ("DEAD",),
) -> int:
    """Delete these runs (those still in `states` now: finished ones, whose messages are gone)
    and release their job ids; audited once."""
    ids = [job_id for job_id, _ in runs]
    with runtime.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        gone = [
            r[0]
            for r in conn.execute(
                "DELETE FROM job_runs WHERE job_id = ANY(%s) AND status = ANY(%s) RETURNING job_id",
                (ids, list(states)),
            ).fetchall()
        ]
    runtime.sender.gate.forget(gone)
    audit.record(
        runtime,
        actor=operator.name,
        action="purge",
        target=what,
        count=len(gone),
        detail={"job_ids": gone[:50]},
        client=client,
    )
    return len(gone)
