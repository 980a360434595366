"""The payload contract of `notes:index` (the producers' side)."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import ConfigDict

from shared.contracts.base import Contract, Payload


class NoteIndexV1(Payload):
    # The example is this job's id vector (tests/vectors/generate.py).
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "v": 1,
                    "org_id": "6f1c2a3e-8d4b-4c6f-9a1e-2b3c4d5e6f70",
                    "entity_id": "0d9e4c1a-7b2f-4e8a-b6c3-5a4f3e2d1c0b",
                    "text": "a note",
                }
            ]
        }
    )

    v: Literal[1] = 1
    entity_id: UUID
    text: str


NOTES_INDEX = Contract[NoteIndexV1]("notes:index", (NoteIndexV1,))
