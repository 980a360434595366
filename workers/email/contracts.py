"""Payloads of the email queue.

Header injection is refused here, before anything is queued: addresses are `EmailStr` (which
rejects CR/LF and anything but one bare address) and names are `SingleLine`. Subjects come from
templates; the worker checks the rendered subject the same way.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal
from uuid import UUID

from pydantic import EmailStr, Field

from shared.contracts.base import Contract, Payload, SingleLine


class EmailSendV1(Payload):
    """Send one scheduled email (a `scheduled_emails` row) rendered from a template."""

    v: Literal[1] = 1
    entity_id: UUID = Field(description="scheduled_emails.id")
    template_key: SingleLine = Field(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    recipient_email: EmailStr
    recipient_name: SingleLine | None = Field(
        default=None, max_length=200, description="Display name in To"
    )
    variables: dict[str, Any] = Field(default_factory=dict)
    reply_to: EmailStr | None = None
    lang: Literal["fr", "en"] = "en"

    stable_fields: ClassVar[tuple[str, ...] | None] = (
        "entity_id",
        "template_key",
        "recipient_email",
    )


class EmailSeqRunDueV1(Payload):
    """Enqueue every due scheduled email; `slot` (the minute) makes a double trigger one job."""

    v: Literal[1] = 1
    slot: SingleLine = Field(description="ISO-8601 minute of the trigger, e.g. 2026-11-29T22:41Z")


EMAIL_SEND = Contract[EmailSendV1]("email:send", (EmailSendV1,))
EMAIL_SEQ_RUN_DUE = Contract[EmailSeqRunDueV1]("email-seq:run_due", (EmailSeqRunDueV1,))
