"""`fleet dlq`: the dead-letter queue (DEAD runs): list, show, replay with an audit, purge."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from shared.observability.logging import redact_text

from . import output
from .jobs import AllOrgsOption, JsonOption, OrgOption, ScopeOrgOption, render_run, shown
from .params import default_operator, org_scope, parse_duration

app = typer.Typer(help="Dead jobs: list, show, replay (audited), purge.", no_args_is_help=True)

QueueOption = Annotated[
    str | None, typer.Option("--queue", help="Queue name (`fleet queues status`).")
]


@app.command("list")
def list_dead(
    queue: QueueOption = None,
    job: Annotated[str | None, typer.Option("--job", help="Job name, `<queue>:<job>`.")] = None,
    org: OrgOption = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=10_000, help="Most runs shown.")
    ] = 100,
    as_json: JsonOption = False,
) -> None:
    """List dead runs (attempts exhausted or permanent failure) with their last error."""
    from shared import dlq

    found = dlq.list_dead(queue=queue, job_name=job, org_id=org, limit=limit)
    if as_json:
        output.print_json([shown(run) for run in found])
        return
    output.print_table(
        ("job_id", "org", "job", "attempt", "error_code", "error", "died_at", "replays"),
        (
            (
                output.cell(r.job_id),
                output.cell(r.org_id),
                output.cell(r.job_name),
                output.cell(r.attempt),
                output.cell(r.error_code),
                output.cell(redact_text(r.error or ""), width=60),
                output.cell(r.finished_at),
                output.cell(r.replay_count),
            )
            for r in found
        ),
        title="Dead runs",
        fold=("job_id",),
        below=("org", "job_id"),
        narrow={"org": 9},  # its first hex digits: the id shows it whole
    )


@app.command("show")
def show(
    job_id: Annotated[str, typer.Argument(help="The job id of a dead run.")],
    org: ScopeOrgOption = None,
    all_orgs: AllOrgsOption = False,
    as_json: JsonOption = False,
) -> None:
    """Every field of a dead run: last error, attempts, payload and the replays so far."""
    render_run(job_id, org=org_scope(org, all_orgs), as_json=as_json)


@app.command("replay")
def replay(
    job_id: Annotated[str | None, typer.Argument(help="The job id to replay (or --all).")] = None,
    replay_all: Annotated[
        bool, typer.Option("--all", help="Replay every dead run of --queue.")
    ] = False,
    queue: QueueOption = None,
    org: ScopeOrgOption = None,
    all_orgs: AllOrgsOption = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be replayed; change nothing.")
    ] = False,
    by: Annotated[
        str | None,
        typer.Option("--by", help="Operator recorded in the audit (default: $USER@host)."),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="With --all: most runs replayed.")
    ] = 1_000,
    as_json: JsonOption = False,
) -> None:
    """Enqueue a dead run again under the same job id, attempts reset, audited (who, when).
    Scoped like every command on a job: `--org ORG`, or `--all-orgs` for an operator."""
    from shared import dlq

    if replay_all == (job_id is not None):
        raise typer.BadParameter("give either a JOB_ID or --all --queue Q", param_hint="JOB_ID")
    if replay_all and not queue:
        raise typer.BadParameter("--all needs --queue", param_hint="--queue")
    scope = org_scope(org, all_orgs)
    operator = by or default_operator()
    if job_id is not None:
        done = [dlq.replay(job_id, org_id=scope, by=operator, dry_run=dry_run)]
    else:
        assert queue is not None
        done = dlq.replay_all(queue=queue, org_id=scope, by=operator, dry_run=dry_run, limit=limit)
    if as_json:
        output.print_json(
            {"dry_run": dry_run, "by": operator, "replayed": [r.__dict__ for r in done]}
        )
        return
    verb = "would replay" if dry_run else "replayed"
    for r in done:
        suffix = "" if dry_run else f" as message {r.message_id}"
        output.out.print(f"{verb} {output.cell(r.job_id)}{suffix}")
    output.note(
        f"{verb} {len(done)} run(s) as {operator}"
        + (" (dry run: nothing changed)" if dry_run else "")
    )


@app.command("purge")
def purge(
    older_than: Annotated[
        str, typer.Option("--older-than", help="Age of death, e.g. 30d, 12h, 15m, 1d12h.")
    ],
    queue: QueueOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete dead runs that died longer ago than --older-than."""
    from shared import dlq

    age = parse_duration(older_than)
    cutoff = datetime.now(UTC) - age
    count = dlq.purge(older_than=cutoff, queue=queue)
    if as_json:
        output.print_json({"purged": count, "before": cutoff, "queue": queue})
    else:
        output.out.print(
            f"purged {count} dead run(s) that died before {cutoff.isoformat(timespec='seconds')}"
        )
