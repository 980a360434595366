"""The producer API: `index_note(text)` sends `notes:index`. Importing it starts nothing."""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

from shared.contracts import SYSTEM_ORG

from .jobs import NOTES_INDEX_JOB


def index_note(text: str, *, org_id: UUID = SYSTEM_ORG, note_id: UUID | None = None) -> Any:
    payload = {"v": 1, "org_id": org_id, "entity_id": note_id or uuid.uuid4(), "text": text}
    return NOTES_INDEX_JOB.send(payload)
