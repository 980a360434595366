"""Request and response bodies of the example API (the job views come from `shared.api`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from workers.export.contracts import ExportParams


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmailRequest(_Body):
    template_key: str = Field(examples=["welcome"])
    recipient_email: str = Field(examples=["ada@example.com"])
    recipient_name: str | None = None
    variables: dict[str, Any] = Field(default_factory=dict, examples=[{"NAME": "Ada"}])
    lang: Literal["fr", "en"] = "en"
    reply_to: str | None = None
    send_at: datetime | None = Field(default=None, description="Later: the due sweep sends it")
    direct: bool = Field(
        default=False,
        description="Enqueue on Redis within the request instead of through the outbox "
        "(503 while Redis is down; the default outbox path accepts and publishes later)",
    )


class ExportRequestBody(_Body):
    type: str = Field(examples=["JOB_RUNS"])
    params: ExportParams = Field(default_factory=ExportParams)
    direct: bool = False


class AiTaskBody(_Body):
    task: Literal["summarize", "extract", "classify", "embed"]
    input: str | list[str]
    params: dict[str, Any] = Field(default_factory=dict)
    direct: bool = False


class Accepted(BaseModel):
    """A write was committed and its job staged; follow it at `status_url` / `events_url`."""

    id: UUID
    job_id: str | None
    status: str
    status_url: str | None
    events_url: str | None


class DownloadLink(BaseModel):
    url: str
    expires_in: int


class PageHitView(BaseModel):
    page: int
    rank: float
    snippet: str


class DocumentHitView(BaseModel):
    document_id: UUID
    filename: str | None
    status: str
    rank: float
    pages: list[PageHitView]


class SearchResults(BaseModel):
    items: list[DocumentHitView]


def accepted(entity_id: UUID, job_id: str | None, status: str = "QUEUED") -> Accepted:
    return Accepted(
        id=entity_id,
        job_id=job_id,
        status=status,
        status_url=f"/jobs/{job_id}" if job_id else None,
        events_url=f"/jobs/{job_id}/events" if job_id else None,
    )
