"""Payloads of the ai queue."""

from __future__ import annotations

from typing import Any, ClassVar, Literal
from uuid import UUID

from pydantic import Field

from shared.contracts.base import Contract, Payload


class AiRunV1(Payload):
    """Run one AI task (an `ai_tasks` row)."""

    v: Literal[1] = 1
    entity_id: UUID = Field(description="ai_tasks.id")
    task: Literal["summarize", "extract", "classify", "embed"]
    input: str | list[str] = Field(description="Text, or texts for embed")
    params: dict[str, Any] = Field(default_factory=dict)

    stable_fields: ClassVar[tuple[str, ...] | None] = ("entity_id", "task")


AI_RUN = Contract[AiRunV1]("ai:run", (AiRunV1,))
