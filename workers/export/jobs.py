"""The export domain's job (DESIGN §2). Producers send it through `shared.jobs.catalog`
(`catalog.EXPORT_BUILD`, `catalog.get("export:build")`); the worker binds its handler to it."""

from __future__ import annotations

from shared.jobs.spec import JobSpec

from . import contracts

EXPORT_BUILD = JobSpec(
    contracts.EXPORT_BUILD, queue="export", entity_type="export", time_limit_ms=3_600_000
)

JOBS = (EXPORT_BUILD,)
