"""`email:send`: load the row, render, send over SMTP, record what the server answered.

Outcomes (issue 3; BlockLucky's sender logged a refusal and reported success, see seed 001):
- accepted (250 to DATA): row SENT with the Message-ID and the reply; the next sequence step is
  scheduled in the same transaction. Copies refused while the primary recipient was accepted
  are kept on the row (`refused`) and in the job result: the message was delivered, resending
  would duplicate it for those who got it.
- 5xx, bad template, bad header: row FAILED with the code and text, `PermanentError` (job DEAD).
  A 5xx to the primary RCPT is a bounce: the address is suppressed, its sequences stop, and
  no later email of that org is attempted to it (row CANCELED `RECIPIENT_BOUNCED`, run
  COMPLETED with status SUPPRESSED; issue 16) except templates listed in
  EMAIL_BOUNCE_EXEMPT_TEMPLATES.
- 4xx, connection refused, timeouts before DATA (issue 16): the server's state, not the email's
  fault: row back to QUEUED with the reason, and the job tried again on the deferral schedule
  (deferral.py: doubling waits up to EMAIL_DEFER_MAX_S) without spending an attempt (RetryLater),
  so greylisting and relay restarts end in delivery; FAILED (job DEAD, with the last reply)
  only once EMAIL_OUTAGE_WINDOW_S has passed since the first deferral in a row.
- Idempotency: SENT → nothing is sent (AlreadyDone). SENDING is recorded durably just before
  DATA, so a SENDING row seen by a later delivery means an earlier attempt died inside the DATA
  exchange or before recording the reply. SMTP cannot be asked whether it accepted a message,
  so rather than risk a duplicate the row becomes UNCONFIRMED and the job DEAD with
  EMAIL_UNCONFIRMED: visible in the DLQ, checked in the SMTP server's log (docs/email.md: a
  queue id that reached the queue, not a bare Message-ID line; `fleet email check-log` for
  Postfix), and sent again only by an operator (`fleet email resend`), with the same
  Message-ID. A SENDING row younger than the SMTP timeouts may still be in flight in a worker
  wrongly presumed dead: that delivery waits (RetryLater) instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import psycopg
import structlog
from prometheus_client import Counter
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from shared.errors import AlreadyDone, FleetError, PermanentError, RetryLater
from shared.jobs.context import JobContext
from workers.email.contracts import EmailSendV1

from . import sequences, store
from .feedback import bounces, tracking, unsubscribe
from .message import build_message, envelope_address, message_id_for, serialize
from .smtp import SmtpDeferred, SmtpOutcomeUnknown, SmtpRejected, SmtpRelayFault
from .wiring import Mailer

log = structlog.get_logger("jobfleet.email")

#: The relay refused this fleet's configuration (credentials, TLS): alert on any increase.
RELAY_FAULTS = Counter(
    "jobfleet_email_relay_faults_total",
    "Emails deferred because the SMTP relay refused the fleet's credentials or TLS setting",
    ["cause"],
)


class Unconfirmed(PermanentError):
    """The server may or may not have accepted the message; it is not sent twice automatically."""

    code = "EMAIL_UNCONFIRMED"


class Deferred(RetryLater):
    """The SMTP server deferred the message or could not be reached: tried again later
    without spending an attempt (deferral.py)."""

    def __init__(self, message: str, *, code: str, delay_ms: int) -> None:
        super().__init__(message, delay_ms=delay_ms)
        self.code = code


class _LostRace(Exception):
    """Another delivery of the same email claimed it between load and DATA."""


@dataclass(frozen=True)
class _Stop:
    """Why a delivery ends before SMTP: a result to return or an error to raise after commit."""

    result: dict[str, Any] | None = None
    error: Exception | None = None


def deliver(payload: EmailSendV1, job: JobContext, m: Mailer) -> dict[str, Any]:
    now = m.clock()
    # Not durable on purpose: a row created from the payload, or marked UNCONFIRMED, that a crash
    # loses is derived again by the redelivery. SENDING and SENT are the writes that must last.
    # One statement for the row and its checks (suppression, tracking switch): under load each
    # round trip costs CPU on both sides (issue 16).
    tracked = payload.template_key in m.settings.tracked_templates
    checks = [sequences.bounce_check(payload.org_id, payload.recipient_email)]
    if tracked:
        checks.append(tracking.enabled_check(payload.org_id))
    exempt = payload.template_key in m.settings.bounce_exempt_templates

    def load(conn: psycopg.Connection[Any]) -> tuple[store.EmailRow | None, str | None, list[Any]]:
        row, values = store.load_for_send(conn, payload, now, also=checks)
        return row, None if exempt else sequences.bounce_of(values[0]), values

    # The usual email (sendable, in no sequence, not suppressed) needs no write before SMTP: one
    # autocommit statement. Any other is loaded again and checked in one transaction, the row
    # locked, as the checks may write (UNCONFIRMED, CANCELED).
    with store.autocommit(m.pool) as conn:
        row, bounce, values = load(conn)
    stop: _Stop | None = None
    if not _plainly_sendable(row, payload, bounce):
        with m.pool.connection() as conn:
            row, bounce, values = load(conn)
            stop = _stop_before_send(conn, row, payload, now, m.sending_grace_s, bounce=bounce)
    track = stop is None and tracking.enabled_of(values[1] if tracked else None, tracked=tracked)
    if stop is not None:
        if stop.error is not None:
            raise stop.error
        return stop.result or {}
    assert row is not None
    message_id = message_id_for(job.job_id, m.settings.message_id_domain)
    try:
        rendered = m.templates.render(row.template_key, row.lang, row.variables)
        if track:  # an opt-in template, and the org did not turn tracking off
            rendered = tracking.instrument(m.settings, m.feedback_key, row, now, rendered)
        message, envelope = build_message(
            rendered,
            message_id=message_id,
            from_header=m.settings.from_header,
            to=row.recipient_email,
            to_name=row.recipient_name,
            cc=row.cc,
            reply_to=row.reply_to,
            date=now,
            lang=row.lang,
            headers=unsubscribe.headers(m.settings, m.feedback_key, row, now),
        )
        # VERP: a DSN comes back to an address naming this email (feedback/bounces.py).
        envelope = replace(envelope, sender=bounces.verp_sender(m.settings, m.feedback_key, row))
        content = serialize(message, envelope)
    except PermanentError as exc:
        _finish(m, row, "FAILED", error_code=exc.code, error=str(exc))
        raise
    except Exception as exc:  # a bug: the row still tells what the run will tell
        _finish_unexpected(m, row, job, exc, attempted=False)
        raise

    claimed = False

    def claim() -> None:
        nonlocal claimed
        with store.autocommit(m.pool) as conn:  # one durable statement, one round trip
            if not store.mark_sending(conn, row.id, message_id, m.clock()):
                raise _LostRace(str(row.id))
        claimed = True

    try:
        accepted = m.transport(m.smtp, content, envelope, before_data=claim)
    except _LostRace:
        raise RetryLater(
            f"email {row.id} is being sent by another delivery",
            delay_ms=int(m.sending_grace_s * 1000),
        ) from None
    except SmtpRejected as exc:
        _finish(
            m,
            row,
            "FAILED",
            error_code=exc.error_code,
            error=exc.reason,
            smtp_reply=exc.reason,
            bounce=exc,
            attempted=exc.stage != "data",
        )
        raise PermanentError(
            f"SMTP refused {row.recipient_email} at {exc.stage}: {exc.reason}", code=exc.error_code
        ) from None
    except SmtpDeferred as exc:
        raise _defer(m, row, exc) from None
    except SmtpOutcomeUnknown as exc:
        _finish(m, row, "UNCONFIRMED", error_code=Unconfirmed.code, error=exc.reason)
        raise Unconfirmed(f"email {row.id} Message-ID {message_id}: {exc.reason}") from None
    except Exception as exc:
        if claimed:  # DATA may have gone out: the same rule as a lost connection during DATA
            reason = f"{type(exc).__name__} after SENDING was recorded: {exc}"
            _finish(m, row, "UNCONFIRMED", error_code=Unconfirmed.code, error=reason)
            raise Unconfirmed(f"email {row.id} Message-ID {message_id}: {reason}") from exc
        _finish_unexpected(m, row, job, exc, attempted=True)
        raise
    sent_at = m.clock()
    _record_sent(m, row, accepted.reply, accepted.refused, sent_at)
    if accepted.refused:
        log.warning("email.partially_refused", email_id=str(row.id), refused=accepted.refused)
    return {
        "status": "SENT",
        "message_id": message_id,
        "smtp_reply": accepted.reply,
        "refused": accepted.refused or None,
    }


def _plainly_sendable(row: store.EmailRow | None, payload: EmailSendV1, bounce: str | None) -> bool:
    """True when `_stop_before_send` has nothing to check or write for this row."""
    return (
        row is not None
        and row.status in store.SENDABLE
        and row.sequence_id is None
        and bounce is None
        and row.template_key == payload.template_key
        and row.recipient_email.lower() == payload.recipient_email.lower()
    )


def _stop_before_send(
    conn: psycopg.Connection[Any],
    row: store.EmailRow | None,
    payload: EmailSendV1,
    now: datetime,
    grace_s: float,
    *,
    bounce: str | None = None,
) -> _Stop | None:
    if row is None:
        return _Stop(
            error=PermanentError(
                f"no scheduled email {payload.entity_id} in org {payload.org_id}", code="NOT_FOUND"
            )
        )
    if (
        row.template_key != payload.template_key
        or row.recipient_email.lower() != payload.recipient_email.lower()
    ):
        return _Stop(
            error=PermanentError(
                f"email {row.id}: payload does not match the row", code="PAYLOAD_MISMATCH"
            )
        )
    if row.status == "SENT":
        return _Stop(
            error=AlreadyDone(f"email {row.id} was sent at {row.sent_at} as {row.message_id}")
        )
    if row.status == "CANCELED":
        return _Stop(result={"status": "CANCELED"})
    if row.status == "SENDING" and row.sending_at is not None:
        age = (now - row.sending_at).total_seconds()
        if age < grace_s:
            return _Stop(
                error=RetryLater(
                    f"email {row.id} may still be in flight",
                    delay_ms=int((grace_s - age) * 1000) + 100,
                )
            )
        store.mark(
            conn,
            row.id,
            "UNCONFIRMED",
            now,
            error_code=Unconfirmed.code,
            error="its worker stopped during DATA",
        )
        row = store.get(conn, row.id, row.org_id) or row
    if row.status in ("SENDING", "UNCONFIRMED"):
        return _Stop(
            error=Unconfirmed(
                f"email {row.id} (Message-ID {row.message_id}) was being sent when its attempt stopped; the server "
                f"may have accepted it: check whether the server queued it (docs/email.md, UNCONFIRMED; "
                f"Postfix: `fleet email check-log {row.id} --org {row.org_id} --log <mail.log>`), and only "
                f"if it did not, `fleet email resend {row.id} --org {row.org_id}`"
            )
        )
    if row.sequence_id is not None and not sequences.is_active(conn, row.sequence_id):
        store.mark(conn, row.id, "CANCELED", now, error_code="SEQUENCE_STOPPED")
        return _Stop(result={"status": "CANCELED", "reason": "sequence stopped"})
    if bounce is not None:  # the address hard-bounced (and the template is not exempt)
        store.mark(conn, row.id, "CANCELED", now, error_code="RECIPIENT_BOUNCED", error=bounce)
        return _Stop(result={"status": "SUPPRESSED", "reason": sequences.BOUNCED})
    return None


def _defer(m: Mailer, row: store.EmailRow, exc: SmtpDeferred) -> Exception:
    """QUEUED with the reply and a retry on the deferral schedule, or FAILED (PermanentError)
    once the outage window that began with the first deferral is over."""
    if isinstance(exc, SmtpRelayFault):
        RELAY_FAULTS.labels(exc.error_code).inc()
        log.error("email.relay_fault", cause=exc.error_code, error=exc.reason, email_id=str(row.id))
    now = m.clock()
    with m.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        since, deferrals = store.mark_deferred(
            conn,
            row.id,
            now,
            error_code=exc.error_code,
            error=exc.reason,
            smtp_reply=exc.reason if exc.code else None,
            attempted=exc.stage != "data",
        )
        if m.deferral.expired(since, now):
            reason = (
                f"deferred {deferrals} times since {since.isoformat()} (outage window "
                f"{m.deferral.window_s:g} s); last at {exc.stage}: {exc.reason}"
            )
            store.mark(conn, row.id, "FAILED", now, error_code=exc.error_code, error=reason)
            return PermanentError(reason, code=exc.error_code)
    delay_s = m.deferral.delay_s(deferrals, m.rng)
    log.info(
        "email.deferred",
        email_id=str(row.id),
        deferrals=deferrals,
        retry_in_s=round(delay_s, 1),
        reason=exc.reason,
    )
    return Deferred(f"{exc.stage}: {exc.reason}", code=exc.error_code, delay_ms=int(delay_s * 1000))


def _finish_unexpected(
    m: Mailer, row: store.EmailRow, job: JobContext, exc: Exception, *, attempted: bool
) -> None:
    """An exception the domain did not foresee: the kernel retries it on the policy (DEAD once
    the attempts are spent), so the row goes back to QUEUED, or FAILED on the last attempt,
    with the code the run will show (issue 16: a row left QUEUED under a DEAD run)."""
    code = exc.code if isinstance(exc, FleetError) else type(exc).__name__.upper()
    final = isinstance(exc, PermanentError) or job.attempt >= job.max_attempts
    _finish(
        m,
        row,
        "FAILED" if final else "QUEUED",
        error_code=code,
        error=f"{type(exc).__name__}: {exc}",
        attempted=attempted,
    )


def _finish(
    m: Mailer,
    row: store.EmailRow,
    status: str,
    *,
    error_code: str | None,
    error: str | None,
    smtp_reply: str | None = None,
    bounce: SmtpRejected | None = None,
    attempted: bool = False,
) -> None:
    now = m.clock()
    with m.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        store.mark(
            conn,
            row.id,
            status,
            now,
            error_code=error_code,
            error=error,
            smtp_reply=smtp_reply,
            attempted=attempted,
        )
        if (
            bounce is not None
            and bounce.stage == "rcpt"
            and bounce.recipient == envelope_address(row.recipient_email)
        ):
            sequences.suppress(
                conn,
                row.org_id,
                row.recipient_email,
                reason=sequences.BOUNCED,
                now=now,
                detail=bounce.reason,
            )


#: Recording SENT on a database that cannot be reached: 6 tries, 0.2 s apart then twice as long
#: each time (6.2 s in all), then the error is the job's.
RECORD_SENT_TRIES = 6
RECORD_SENT_FIRST_WAIT_S = 0.2


def _record_sent(
    m: Mailer, row: store.EmailRow, reply: str, refused: dict[str, str], sent_at: datetime
) -> None:
    """SENT and the next sequence step, durably. The server has the message now: a failure
    here is retried in place (a retried job would find SENDING and stop at UNCONFIRMED)."""

    def retrying(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        log.warning("email.record_sent_retry", email_id=str(row.id), error=str(error))

    for attempt in Retrying(
        retry=retry_if_exception_type(psycopg.OperationalError),
        stop=stop_after_attempt(RECORD_SENT_TRIES),
        wait=wait_exponential(multiplier=RECORD_SENT_FIRST_WAIT_S),
        before_sleep=retrying,
        reraise=True,
    ):
        with attempt:
            if row.sequence_id is None:  # one durable statement, one round trip
                with store.autocommit(m.pool) as conn:
                    store.mark_sent(conn, row.id, reply, refused, sent_at)
            else:
                with m.pool.connection() as conn:  # SENT and the next step, one transaction
                    store.mark_sent(conn, row.id, reply, refused, sent_at)
                    sequences.after_sent(conn, row, sent_at)
