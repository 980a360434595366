"""`fleet email ...`: due emails, template previews, the dev mailbox and its sink, resends.

Registered lazily by the fleet CLI as `workers.email.cli:app` (the kernel imports no worker).
"""

from __future__ import annotations

import getpass
import os
import uuid
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Email worker: due emails, previews, the dev mailbox.", no_args_is_help=True)


def _maildir() -> Path:
    from shared.config import get_settings

    return Path(get_settings().var_dir) / "mail"


@app.command("run-due")
def run_due_command() -> None:
    """Hand every due scheduled email to `email:send` now (what the scheduler does every minute)."""
    from .due import run_due
    from .wiring import get_mailer

    m = get_mailer()
    stats = run_due(m.pool.connection, m.send_job, now=m.clock(), batch=m.settings.run_due_batch)
    typer.echo(
        f"enqueued {stats.enqueued}, already queued {stats.duplicates}, canceled {stats.canceled}"
    )


def _parse_vars(pairs: list[str]) -> dict[str, str]:
    variables = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected K=V, got {pair!r}", param_hint="--var")
        variables[key] = value
    return variables


@app.command()
def preview(
    template: Annotated[str, typer.Argument(help="Template key, e.g. otp-code")],
    lang: Annotated[str, typer.Option(help="fr or en")] = "en",
    var: Annotated[
        list[str] | None, typer.Option("--var", help="Template variable K=V (repeatable)")
    ] = None,
    to: Annotated[str, typer.Option(help="Recipient shown in the preview")] = "preview@example.com",
    out: Annotated[Path | None, typer.Option(help="Directory (default: var/mail/preview)")] = None,
) -> None:
    """Render TEMPLATE and write the message as .eml and its HTML part as .html."""
    from shared.errors import PermanentError

    from .message import build_message, message_id_for, serialize
    from .settings import email_settings
    from .templates import Templates
    from .wiring import utcnow

    settings = email_settings()
    try:
        rendered = Templates(product_name=settings.product_name).render(
            template, lang, _parse_vars(var or [])
        )
        message, envelope = build_message(
            rendered,
            message_id=message_id_for(f"preview:{uuid.uuid4()}", settings.message_id_domain),
            from_header=settings.from_header,
            to=to,
            date=utcnow(),
            lang=lang,
        )
    except PermanentError as exc:
        typer.echo(f"error [{exc.code}]: {exc}", err=True)
        raise typer.Exit(1) from None
    directory = out or _maildir() / "preview"
    directory.mkdir(parents=True, exist_ok=True)
    eml, html = directory / f"{template}.{lang}.eml", directory / f"{template}.{lang}.html"
    eml.write_bytes(serialize(message, envelope))
    html.write_text(rendered.html, encoding="utf-8")
    typer.echo(f"subject: {rendered.subject}\n{eml}\n{html}")


@app.command()
def inbox(
    maildir: Annotated[Path | None, typer.Option(help="Default: var/mail")] = None,
    limit: Annotated[int, typer.Option(help="Show the last N messages")] = 20,
) -> None:
    """List the messages the dev sink received (newest last)."""
    from .sink import read_inbox

    items = read_inbox(maildir or _maildir())
    for item in items[-limit:]:
        typer.echo(
            f"{item.date}  {item.envelope_to}  {item.subject}  {item.message_id}  {item.path.name}"
        )
    typer.echo(f"{len(items)} message(s) in {maildir or _maildir()}")


@app.command()
def sink(
    host: Annotated[str | None, typer.Option(help="Default: SMTP_HOST")] = None,
    port: Annotated[int | None, typer.Option(help="Default: SMTP_PORT")] = None,
    maildir: Annotated[Path | None, typer.Option(help="Default: var/mail")] = None,
) -> None:
    """Run the dev SMTP sink in the foreground."""
    from .settings import email_settings
    from .sink import serve

    settings = email_settings()
    serve(host or settings.smtp_host, port or settings.smtp_port, maildir or _maildir())


@app.command("check-log")
def check_log(
    log: Annotated[Path, typer.Option(help="Postfix log file (e.g. /var/log/mail.log)")],
    email_id: Annotated[
        uuid.UUID | None, typer.Argument(help="scheduled_emails id (or --message-id)")
    ] = None,
    org: Annotated[uuid.UUID | None, typer.Option(help="Org of the email")] = None,
    message_id: Annotated[str | None, typer.Option(help="Message-ID, e.g. <abc@host>")] = None,
) -> None:
    """Did Postfix queue an UNCONFIRMED email? Exit 0: queued (do not resend); 3: seen by cleanup
    but never queued (safe to resend); 4: not in this log (look in rotated logs)."""
    from .maillog import NOT_FOUND, QUEUED, postfix_verdict

    if message_id is None:
        if email_id is None or org is None:
            raise typer.BadParameter("give EMAIL_ID with --org, or --message-id")
        message_id = _message_id_of(email_id, org)
    with open(log, encoding="utf-8", errors="replace") as lines:
        verdict = postfix_verdict(lines, message_id)
    for line in verdict.lines:
        typer.echo(f"  {line}")
    if verdict.status == QUEUED:
        typer.echo(f"{message_id}: QUEUED by Postfix as {', '.join(verdict.queued)}: do not resend")
        raise typer.Exit(0)
    if verdict.status == NOT_FOUND:
        typer.echo(f"{message_id}: NOT_FOUND in {log}: check rotated logs and the other relays")
        raise typer.Exit(4)
    typer.echo(
        f"{message_id}: NOT_QUEUED (cleanup saw it as {', '.join(verdict.queue_ids)}, never "
        f"queued): safe to resend"
    )
    raise typer.Exit(3)


def _message_id_of(email_id: uuid.UUID, org: uuid.UUID) -> str:
    from shared.runtime import get_runtime

    from . import store

    with get_runtime().pool.connection() as conn:
        row = store.get(conn, email_id, org)
    if row is None or row.message_id is None:
        typer.echo(f"error: no email {email_id} with a Message-ID in org {org}", err=True)
        raise typer.Exit(1)
    return row.message_id


@app.command()
def resend(
    email_id: Annotated[uuid.UUID, typer.Argument(help="scheduled_emails id")],
    org: Annotated[uuid.UUID, typer.Option(help="Org of the email")],
    by: Annotated[str, typer.Option(help="Operator name for the audit")] = "",
) -> None:
    """Send again an UNCONFIRMED or FAILED email (first `fleet email check-log`: docs/email.md)."""
    from shared.errors import FleetError
    from shared.runtime import get_runtime

    from .resend import resend as do_resend
    from .wiring import utcnow

    operator = by or os.environ.get("USER") or getpass.getuser()
    try:
        replay = do_resend(get_runtime(), email_id, org, by=operator, now=utcnow())
    except FleetError as exc:
        typer.echo(f"error [{exc.code}]: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"requeued {replay.job_id}")


@app.command()
def feedback(
    org: Annotated[uuid.UUID, typer.Option(help="Org of the emails")],
    email_id: Annotated[
        uuid.UUID | None, typer.Option("--email", help="One email (default: all of the org)")
    ] = None,
    tracking: Annotated[
        str | None, typer.Option(help="Turn the org's open/click tracking `on` or `off`")
    ] = None,
) -> None:
    """Opens, clicks, DSN bounces and unsubscribes of an org (docs/email.md, feedback loop)."""
    from shared.runtime import get_runtime

    from .feedback import tracking as track
    from .wiring import utcnow

    with get_runtime().pool.connection() as conn:
        if tracking is not None:
            if tracking not in ("on", "off"):
                typer.echo("error: --tracking on|off", err=True)
                raise typer.Exit(2)
            track.set_org_tracking(conn, org, tracking == "on", utcnow())
            typer.echo(f"tracking {tracking} for org {org}")
        found = track.counts(conn, org, email_id)
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'BOUNCED') FROM scheduled_emails"
            " WHERE org_id = %s AND (%s::uuid IS NULL OR id = %s)",
            (org, email_id, email_id),
        ).fetchone()
        unsubscribed = conn.execute(
            "SELECT count(*) FROM email_suppressions WHERE org_id = %s AND reason = 'UNSUBSCRIBED'",
            (org,),
        ).fetchone()
    assert row is not None and unsubscribed is not None
    typer.echo(
        f"opened {found['opened']}  clicks {found['clicks']} (emails clicked {found['clicked']})"
        f"  bounced (DSN) {row[0]}  unsubscribed addresses {unsubscribed[0]}"
    )
