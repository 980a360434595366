"""The payload contract of `notes:index` (the producers' side)."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from shared.contracts.base import Contract, Payload


class NoteIndexV1(Payload):
    v: Literal[1] = 1
    entity_id: UUID
    text: str


NOTES_INDEX = Contract[NoteIndexV1]("notes:index", (NoteIndexV1,))
