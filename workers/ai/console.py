"""The ai domain's part of the operator console (`shared/console/plugins.py`; its registration's
`console`): AI cost per org and day on the Tenants page, scoped to the operator's orgs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from uuid import UUID

from shared.console.plugins import Panel, present
from shared.runtime import Runtime

from .usage import OrgDayCost, cost_by_org_day

NAME = "ai"
TEMPLATES = Path(__file__).parent / "templates" / "console"
DAYS = 14


def tenant_panel(runtime: Runtime, orgs: Sequence[UUID]) -> Panel:
    """The last `DAYS` days of `ai_usage` (None: the table is not migrated)."""
    cost = cost_per_day(runtime, orgs=orgs) if present(runtime, "ai_usage")["ai_usage"] else None
    return "ai/cost.html", {"cost": cost, "days": DAYS}


def cost_per_day(
    runtime: Runtime, *, orgs: Sequence[UUID] = (), days: int = DAYS
) -> list[OrgDayCost]:
    with runtime.pool.connection() as conn:
        return cost_by_org_day(conn, orgs=orgs, days=days)
