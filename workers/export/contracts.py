"""Payloads of the export queue."""

from __future__ import annotations

from datetime import date
from typing import Any, ClassVar, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    field_validator,
    model_validator,
)

from shared.contracts.base import Contract, Payload

#: The export types the export worker ships (its registry registers them, and any other type
#: registered in a process, in `EXPORT_TYPES`); the JSON Schema lists these.
SHIPPED_TYPES = frozenset(
    {"ACCOUNTING", "EMAILS", "JOB_RUNS", "LOTTERY_TICKETS", "LOTTERY_WINNERS"}
)
EXPORT_TYPES: set[str] = set(SHIPPED_TYPES)


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

    @model_validator(mode="after")
    def _bom_for_csv(self) -> ExportParams:
        if self.bom and self.format not in ("CSV", "ZIP"):
            raise ValueError("bom applies to CSV and ZIP only")
        return self


class ExportBuildV1(Payload):
    """Build one export (an `exports` row) into object storage. Superseded by v2 (which checks
    the export type at send); still accepted, upgraded on arrival."""

    v: Literal[1] = 1
    entity_id: UUID = Field(description="exports.id")
    requested_by: UUID
    type: str = Field(min_length=1, max_length=64, pattern=r"^[A-Z][A-Z0-9_]*$")
    params: ExportParams = Field(default_factory=ExportParams)

    stable_fields: ClassVar[tuple[str, ...] | None] = ("entity_id", "type", "params")


class ExportBuildV2(Payload):
    """Build one export (an `exports` row) into object storage; the worker creates the row from
    this payload when a producer sent the job by name (docs/producers.md)."""

    v: Literal[2] = 2
    entity_id: UUID = Field(description="exports.id")
    requested_by: UUID
    type: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Z][A-Z0-9_]*$",
        description="An export type the export worker knows (`fleet export types`)",
        json_schema_extra={"enum": list[JsonValue](sorted(SHIPPED_TYPES))},
    )
    params: ExportParams = Field(default_factory=ExportParams)

    stable_fields: ClassVar[tuple[str, ...] | None] = ("entity_id", "type", "params")

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        # Checked at send (issue 30: `type: "NOPE"` used to be accepted and die in the worker).
        if value not in EXPORT_TYPES:
            known = ", ".join(sorted(EXPORT_TYPES))
            raise ValueError(f"unknown export type {value!r}; known: {known}")
        return value


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "v": 2}  # the same fields: v2 only checks the type


EXPORT_BUILD = Contract[ExportBuildV2](
    "export:build", (ExportBuildV1, ExportBuildV2), {1: _v1_to_v2}
)
