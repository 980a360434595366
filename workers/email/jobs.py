"""The email domain's jobs (DESIGN §2). Producers send them through `shared.jobs.catalog`
(`catalog.EMAIL_SEND`, `catalog.get("email:send")`); the worker binds its handlers to them."""

from __future__ import annotations

from shared.jobs.spec import JobSpec

from . import contracts

EMAIL_SEND = JobSpec(contracts.EMAIL_SEND, queue="email", entity_type="scheduled_email")
EMAIL_SEQ_RUN_DUE = JobSpec(
    contracts.EMAIL_SEQ_RUN_DUE, queue="email", entity_type="email_sequence_slot"
)

JOBS = (EMAIL_SEND, EMAIL_SEQ_RUN_DUE)
