"""The AI domain's job (DESIGN §2). Producers send it through `shared.jobs.catalog`
(`catalog.AI_RUN`, `catalog.get("ai:run")`); the worker binds its handler to it."""

from __future__ import annotations

from shared.jobs.spec import JobSpec

from . import contracts

AI_RUN = JobSpec(contracts.AI_RUN, queue="ai", entity_type="ai_task")

JOBS = (AI_RUN,)
