"""The job-status HTTP API (FastAPI) a product mounts: `job_router(org=...)`. Needs the `api` extra."""

from __future__ import annotations

from .models import CancelResult, JobEvent, JobPage, JobStatus, JobView, Problem, ReplayResult
from .router import job_router

__all__ = [
    # The router, and what it answers.
    "CancelResult",
    "JobEvent",
    "JobPage",
    "JobStatus",
    "JobView",
    "Problem",
    "ReplayResult",
    "job_router",
]
