"""The domain's job declarations (registration `jobs`): the catalog adds them."""

from __future__ import annotations

from shared.jobs.spec import JobSpec

from .contracts import NOTES_INDEX

NOTES_INDEX_JOB = JobSpec(NOTES_INDEX, queue="notes", entity_type="note")
JOBS = (NOTES_INDEX_JOB,)
