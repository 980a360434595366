"""`fleet jobs`: list, inspect, cancel and send runs (an operator's view of `job_runs`)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import typer

from ..jobs.statuses import RUN_STATUSES
from . import output
from .params import load_payload, one_of, org_scope

app = typer.Typer(help="Runs of jobs: list, show, cancel, send.", no_args_is_help=True)


OrgOption = Annotated[
    UUID | None,
    typer.Option("--org", help="Only this tenant's runs (default: every org, operator view)."),
]
#: Commands on one job id: the tenant is said, or operators say `--all-orgs` (`org_scope`).
ScopeOrgOption = Annotated[
    UUID | None, typer.Option("--org", help="The job's tenant (or --all-orgs).")
]
AllOrgsOption = Annotated[
    bool, typer.Option("--all-orgs", help="Operators: the job of any tenant (instead of --org).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("list")
def list_runs(
    org: OrgOption = None,
    status: Annotated[
        str | None, typer.Option("--status", help=f"One of {', '.join(RUN_STATUSES)}.")
    ] = None,
    job: Annotated[str | None, typer.Option("--job", help="Job name, `<queue>:<job>`.")] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", help="Queue name (`fleet queues status`).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000, help="Most runs shown.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first."""
    from shared.jobs import runs

    found = runs.list_runs(
        org_id=org,
        status=one_of(status, RUN_STATUSES, option="--status"),
        job_name=job,
        queue=queue,
        limit=limit,
    )
    if as_json:
        output.print_json([shown(run) for run in found])
        return
    output.print_table(
        ("job_id", "org", "job", "status", "attempt", "queued_at", "finished_at", "error"),
        (
            (
                output.cell(r.job_id),
                output.cell(r.org_id),
                output.cell(r.job_name),
                output.cell(r.status),
                output.cell(f"{r.attempt}/{r.max_attempts}" if r.max_attempts else r.attempt),
                output.cell(r.queued_at),
                output.cell(r.finished_at),
                output.cell(r.error_code),
            )
            for r in found
        ),
        title="Runs",
        fold=("job_id",),
        below=("org", "job_id"),
        narrow={"org": 9},  # its first hex digits: the id shows it whole
    )


@app.command("show")
def show(
    job_id: Annotated[str, typer.Argument(help="The job id (as printed by send or list).")],
    org: ScopeOrgOption = None,
    all_orgs: AllOrgsOption = False,
    as_json: JsonOption = False,
) -> None:
    """Every field of one run: status, attempts, error, progress, payload, replay history."""
    render_run(job_id, org=org_scope(org, all_orgs), as_json=as_json)


def shown(run: Any) -> dict[str, Any]:
    """What a view prints of a run: secrets in its payload, result, checkpoint and error masked
    (DESIGN §8: by key name, and the tokens of URLs), as in the logs and the job API."""
    from shared.observability.logging import redact

    data: dict[str, Any] = run.as_dict()
    for name in ("payload", "result", "checkpoint", "error"):
        data[name] = redact(data[name])
    return data


def render_run(job_id: str, *, org: UUID | None, as_json: bool) -> None:
    """Shared by `jobs show` and `dlq show`."""
    from shared import dlq
    from shared.errors import RunNotFound
    from shared.jobs import runs

    run = runs.find(job_id, org_id=org)
    if run is None:
        raise RunNotFound(f"no run {job_id}" + (f" for org {org}" if org else ""))
    from shared.observability.logging import redact

    replays = redact(dlq.history(job_id, org_id=org))
    if as_json:
        output.print_json({**shown(run), "replays": replays})
        return
    fields: dict[str, Any] = {**run.__dict__, **shown(run)}
    for name in ("queued_at", "started_at", "finished_at", "next_retry_at", "replayed_at"):
        fields[name] = getattr(run, name)  # datetimes, printed by `cell` to the second
    error = fields.pop("error")
    output.print_fields(fields, title=f"Run {job_id}")
    if error:
        output.out.print("\n[bold]error[/bold]")
        output.out.print(output.cell(error))
    if replays:
        output.print_table(
            ("replayed_at", "replayed_by", "previous_error_code", "previous_attempt"),
            (
                (
                    output.cell(r["replayed_at"]),
                    output.cell(r["replayed_by"]),
                    output.cell(r["previous_error_code"]),
                    output.cell(r["previous_attempt"]),
                )
                for r in replays
            ),
            title="Replays",
        )


@app.command("cancel")
def cancel(
    job_id: Annotated[str, typer.Argument(help="The job id to cancel.")],
    org: ScopeOrgOption = None,
    all_orgs: AllOrgsOption = False,
    as_json: JsonOption = False,
) -> None:
    """Cancel a run: STAGED (not yet published), QUEUED or waiting-to-retry runs at once, RUNNING
    ones at their next progress."""
    from shared.jobs import runs

    status = runs.cancel(job_id, org_id=org_scope(org, all_orgs))
    if as_json:
        output.print_json({"job_id": job_id, "status": status})
    else:
        output.out.print(f"{output.cell(job_id)}: {status}")


@app.command("send")
def send(
    job_name: Annotated[
        str, typer.Argument(help="Job name, `<queue>:<job>` (see `fleet contracts list`).")
    ],
    payload: Annotated[
        str, typer.Option("--payload", "-p", help="The payload as JSON, or @file (@- for stdin).")
    ],
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="Request id carried into logs and the run.")
    ] = None,
    delay_ms: Annotated[
        int | None,
        typer.Option("--delay-ms", min=0, help="Start no earlier than this many ms from now."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Validate a payload against the job's contract and enqueue it (deduplicated by job id)."""
    from shared.jobs import catalog
    from shared.runtime import get_runtime

    spec = catalog.get(job_name)
    data = load_payload(payload)
    result = spec.send(data, request_id=request_id, delay_ms=delay_ms)
    if not result.duplicate and not get_runtime().sender.flush():
        # The message is in Redis; the worker records the run itself when it starts it.
        output.note("warning: the QUEUED row is not written yet (Postgres slow or down)")
    if as_json:
        output.print_json(result.__dict__)
        return
    state = "duplicate of an existing run" if result.duplicate else "enqueued"
    output.out.print(f"{output.cell(result.job_id)}")
    output.note(f"{state}: status {result.status}, message {result.message_id}")
