"""Payloads of the doc queue."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from shared.contracts.base import Contract, Payload


class DocIngestV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID = Field(description="documents.id")
    file_object_id: UUID


class DocOcrV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID = Field(description="documents.id")
    page: int = Field(ge=1)


class DocExtractStructuredV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID = Field(description="documents.id")
    schema_name: str = Field(alias="schema", min_length=1, max_length=64)

    def wire(self) -> dict[str, Any]:
        # The wire name is `schema` (the alias): without by_alias the message would carry
        # `schema_name`, which `parse` rejects (extra="forbid"), so no such job could ever run.
        return self.model_dump(mode="json", by_alias=True)


class DocIndexSearchV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID = Field(description="documents.id")


DOC_INGEST = Contract[DocIngestV1]("doc:ingest", (DocIngestV1,))
DOC_OCR = Contract[DocOcrV1]("doc:ocr", (DocOcrV1,))
DOC_EXTRACT_STRUCTURED = Contract[DocExtractStructuredV1](
    "doc:extract_structured", (DocExtractStructuredV1,)
)
DOC_INDEX_SEARCH = Contract[DocIndexSearchV1]("doc:index_search", (DocIndexSearchV1,))
