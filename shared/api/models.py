"""What the job-status API answers: typed views of `job_runs` rows (OpenAPI pinned by a test)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class JobStatus(StrEnum):
    #: Written in the producer's transaction; published once it commits (docs/producers.md).
    STAGED = "STAGED"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    DEAD = "DEAD"
    CANCELED = "CANCELED"


#: States a run does not leave by itself (a DEAD run leaves only by an operator's replay).
TERMINAL = frozenset({JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELED})


class Progress(BaseModel):
    model_config = ConfigDict(frozen=True)

    done: int
    total: int


class JobView(BaseModel):
    """One job as its producer sees it. Payload and result are redacted (secret keys → `***`)."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    org_id: UUID
    job_name: str
    queue: str
    status: JobStatus
    entity_type: str | None = None
    entity_id: str | None = None
    payload: Any = None
    result: Any = None
    error_code: str | None = None
    error: str | None = None
    attempt: int = 0
    max_attempts: int | None = None
    progress: Progress | None = None
    cancel_requested: bool = False
    request_id: str | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    next_retry_at: datetime | None = None
    replay_count: int = 0


class JobPage(BaseModel):
    """A page of jobs, newest first. Pass `next_cursor` as `cursor` for the next page (None: the
    last page)."""

    items: list[JobView]
    next_cursor: str | None = None


class CancelResult(BaseModel):
    job_id: str
    #: CANCELED (at once) or CANCEL_REQUESTED (running: honoured at its next progress report).
    status: str


class ReplayResult(BaseModel):
    job_id: str
    message_id: str | None = None
    replayed_by: str


class JobEvent(BaseModel):
    """The data of one Server-Sent Event of `GET /jobs/{job_id}/events`."""

    job_id: str
    status: JobStatus
    attempt: int
    progress: Progress | None = None
    error_code: str | None = None
    terminal: bool = Field(description="True on the last event of the stream")


class Problem(BaseModel):
    """An error answer: a stable code and a sentence."""

    code: str
    detail: str


class QueueState(BaseModel):
    """A queue as operators see it: paused (by whom, since when, why) or running."""

    queue: str
    paused: bool
    by: str | None = None
    reason: str | None = None
    since: datetime | None = None


class PauseRequest(BaseModel):
    reason: str = Field(min_length=1, max_length=1000, description="Why (kept in the audit)")
