"""The email step of `fleet demo` (registered as `workers.email.demo:scenario`): a two-step
welcome sequence and a transactional sign-in code, written and sent as a product would."""

from __future__ import annotations

from uuid import UUID

from shared.cli.scenario import Scenario, now
from shared.contracts import SYSTEM_ORG
from shared.jobs import catalog
from shared.runtime import Runtime

from . import sequences
from .client import schedule_email


class Emails(Scenario):
    """A two-step welcome sequence and a transactional sign-in code."""

    def __init__(self, org: UUID, *, step_delay_s: int = 2) -> None:
        super().__init__("email")
        self.org, self.step_delay_s = org, step_delay_s
        self.sequence: UUID | None = None
        self._last_trigger = 0.0

    def start(self, rt: Runtime) -> None:
        variables = {
            "NAME": "Ada",
            "MESSAGE": "How is your first week going? Tell us what you would like to see next.",
            "TICKET_REF": "WELCOME-1",
        }
        with rt.pool.connection() as conn, conn.transaction():
            # The first step is due now; the due sweep (`tick`) hands it to `email:send`.
            self.sequence = sequences.start(
                conn,
                org_id=self.org,
                name="welcome",
                recipient_email="ada@example.com",
                recipient_name="Ada",
                lang="en",
                variables=variables,
                steps=[
                    sequences.Step("welcome", 0),
                    sequences.Step("support-reply", self.step_delay_s),
                ],
                now=now(),
            )
        with rt.sessions() as session, session.begin():
            schedule_email(
                session,
                org_id=self.org,
                template_key="otp-code",
                recipient_email="grace@example.com",
                variables={"CODE": "493 817", "EXPIRES_MINUTES": 10},
                via="send",
            )
        self.tick(rt)

    def tick(self, rt: Runtime) -> None:
        # The scheduler sends `email-seq:run_due` once a minute; the demo does not wait for it.
        # A per-second slot keeps each trigger its own job (the scheduler's slot is the minute).
        at = now()
        if at.timestamp() - self._last_trigger >= 1.0:
            self._last_trigger = at.timestamp()
            slot = at.strftime("%Y-%m-%dT%H:%M:%SZ")
            catalog.EMAIL_SEQ_RUN_DUE.send({"org_id": SYSTEM_ORG, "slot": slot})

    def pending(self, rt: Runtime) -> bool:
        with rt.pool.connection() as conn:
            row = conn.execute(
                "SELECT status FROM email_sequences WHERE id = %s", (self.sequence,)
            ).fetchone()
        return row is None or row[0] == "ACTIVE"

    def results(self, rt: Runtime) -> list[str]:
        var = rt.settings.var_dir
        return [
            "mail: `fleet email inbox` (the dev sink keeps each message as "
            f"{var}/mail/*.eml) — 2 welcome-sequence steps to ada@, 1 sign-in code to grace@"
        ]


def scenario(org: UUID, *, small: bool) -> Scenario:
    """The same emails for `fleet demo` and `fleet demo --small`."""
    return Emails(org)


__all__ = ["Emails", "scenario"]
