"""Payloads of the export queue."""

from __future__ import annotations

from datetime import date
from typing import Any, ClassVar, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from .base import Contract, Payload


class DateRange(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    start: date
    end: date

    @model_validator(mode="after")
    def _ordered(self) -> DateRange:
        if self.end < self.start:
            raise ValueError("end must not be before start")
        return self


class ExportParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    date_range: DateRange | None = None
    format: Literal["CSV", "XLSX", "PDF", "ZIP"] = "CSV"
    filters: dict[str, Any] = Field(default_factory=dict)
    bom: bool = Field(
        default=False,
        description="CSV (also inside ZIP) starts with a UTF-8 byte order mark, so that Excel "
        "on Windows reads it as UTF-8",
    )

    @model_serializer(mode="wrap")
    def _without_default_bom(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # `bom` came after v1 shipped: leaving it out while false keeps the wire form, and so
        # the job id of every export requested without it, what it was (tests/vectors).
        data: dict[str, Any] = handler(self)
        if not self.bom:
            data.pop("bom", None)
        return data

    @model_validator(mode="after")
    def _bom_for_csv(self) -> ExportParams:
        if self.bom and self.format not in ("CSV", "ZIP"):
            raise ValueError("bom applies to CSV and ZIP only")
        return self


class ExportBuildV1(Payload):
    """Build one export (an `exports` row) into object storage."""

    v: Literal[1] = 1
    entity_id: UUID = Field(description="exports.id")
    requested_by: UUID
    type: str = Field(min_length=1, max_length=64, pattern=r"^[A-Z][A-Z0-9_]*$")
    params: ExportParams = Field(default_factory=ExportParams)

    stable_fields: ClassVar[tuple[str, ...] | None] = ("entity_id", "type", "params")


EXPORT_BUILD = Contract[ExportBuildV1]("export:build", (ExportBuildV1,))
