"""The worker process: `dramatiq jf_notes.app`, the only module of the domain that boots."""

from __future__ import annotations

from typing import Any

from shared.bootstrap import boot_worker
from shared.jobs.context import JobContext
from shared.jobs.handler import handler

from .contracts import NoteIndexV1
from .jobs import NOTES_INDEX_JOB
from .settings import notes_settings

broker = boot_worker("notes")


@handler(NOTES_INDEX_JOB, broker=broker)
def index(payload: NoteIndexV1, job: JobContext) -> dict[str, Any]:
    words = payload.text.split()[: notes_settings().max_words]
    return {"words": len(words)}
