"""Bulk actions on a Runs search, across states: cancel, retry, delete (issue 32).

One flow for the three: the runs of the search in the action's states (at most
`dead.BULK_LIMIT`, oldest first), a dry run (how many, which) until the operator confirms, then
the action on each run, audited once. Each action is the one that already exists for one run:
a cancel is `shared.jobs.runs.cancel` (the CLI's and the API's), a retry is the dead letters'
replay (`dead.replay`: `shared.dlq.replay`, same job id, attempts reset, `job_replays`), a
delete is the dead letters' purge (`dead.purge`: the job ids released).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from .. import dlq
from ..errors import FleetError
from ..jobs import runs as run_store
from ..runtime import Runtime
from . import audit, dead, search
from .security import Operator


@dataclass(frozen=True)
class BulkAction:
    name: str
    #: The states a run is acted on in; the search's other runs are left alone.
    states: tuple[str, ...]
    #: What the dry run says happens to each run.
    effect: str
    button: str


ACTIONS = {
    "cancel": BulkAction(
        "cancel",
        ("STAGED", "QUEUED", "FAILED", "RUNNING"),
        "A STAGED, QUEUED or FAILED run is canceled at once, a RUNNING one at its handler's"
        " next progress or checkpoint.",
        "danger",
    ),
    # Not COMPLETED (a second run of finished work is not a retry) nor FAILED (its retry is
    # already scheduled) nor QUEUED/RUNNING (their message is in the broker).
    "retry": BulkAction(
        "retry",
        dlq.REPLAYABLE,
        "A DEAD or CANCELED run is enqueued again under its job id, attempts reset, the replay on"
        " its record.",
        "primary",
    ),
    # Finished runs only: a queued or running one has a message in the broker (cancel it first).
    "delete": BulkAction(
        "delete",
        ("COMPLETED", "DEAD", "CANCELED"),
        "A COMPLETED, DEAD or CANCELED run is deleted and its job id released (it can be sent"
        " again); runs still queued or running are not deleted: cancel them first.",
        "danger",
    ),
}


def targets(
    runtime: Runtime, action: BulkAction, flt: search.RunFilter, orgs: tuple[UUID, ...]
) -> list[tuple[str, UUID]]:
    """(job id, org) of the search's runs this action applies to, at most `dead.BULK_LIMIT`."""
    if flt.status is not None:
        statuses: Sequence[str] = [flt.status] if flt.status in action.states else []
    else:
        statuses = action.states
    found: list[tuple[str, UUID]] = []
    for status in statuses:
        left = dead.BULK_LIMIT - len(found)
        if left <= 0:
            break
        one = search.RunFilter(**{**flt.__dict__, "status": status})
        found += search.matching_ids(runtime, one, orgs=orgs, limit=left)
    return found


def describe(flt: search.RunFilter) -> str:
    parts = [f"{k}={v}" for k, v in flt.__dict__.items() if v is not None]
    return "search " + (" ".join(parts) or "(every run)")


def act(
    runtime: Runtime,
    action: BulkAction,
    runs: Sequence[tuple[str, UUID]],
    operator: Operator,
    *,
    client: str | None,
    what: str,
) -> str:
    """Do it; returns what the operator is told."""
    if action.name == "retry":
        outcome = dead.replay(
            runtime, runs, operator, client=client, what=what, states=action.states
        )
        refused = f", {len(outcome.failed)} refused" if outcome.failed else ""
        return f"retried {len(outcome.done)} of {len(runs)}{refused}"
    if action.name == "delete":
        gone = dead.purge(runtime, runs, operator, client=client, what=what, states=action.states)
        return f"deleted {gone} of {len(runs)}"
    counts: dict[str, int] = {}
    for job_id, _org in runs:
        try:
            status = run_store.cancel(job_id, org_id=None, runtime=runtime)
        except FleetError:
            status = "GONE"  # purged or finished meanwhile: nothing to cancel
        counts[status] = counts.get(status, 0) + 1
    audit.record(runtime, actor=operator.name, action="runs-cancel", target=what,
                 count=len(runs), detail=counts, client=client)  # fmt: skip
    said = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
    return f"canceled {counts.get('CANCELED', 0)} of {len(runs)} ({said})"
