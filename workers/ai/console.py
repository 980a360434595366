"""The ai domain's part of the operator console (`shared/console/plugins.py`; its registration's
`console`): AI cost per org and day on the Tenants page, scoped to the operator's orgs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from shared.console.plugins import Panel, org_scope, present, rows
from shared.runtime import Runtime

NAME = "ai"
TEMPLATES = Path(__file__).parent / "templates" / "console"
DAYS = 14


def tenant_panel(runtime: Runtime, orgs: Sequence[UUID]) -> Panel:
    """The last `DAYS` days of `ai_usage` (None: the table is not migrated)."""
    cost = cost_per_day(runtime, orgs=orgs) if present(runtime, "ai_usage")["ai_usage"] else None
    return "ai/cost.html", {"cost": cost, "days": DAYS}


def cost_per_day(
    runtime: Runtime, *, orgs: Sequence[UUID] = (), days: int = DAYS
) -> list[dict[str, Any]]:
    scope, params = org_scope(orgs)
    return rows(
        runtime,
        "SELECT day, org_id, sum(requests) AS requests, sum(tokens_in) AS tokens_in,"
        " sum(tokens_out) AS tokens_out, sum(cost) AS cost, string_agg(DISTINCT model, ', ') AS models"
        " FROM ai_usage WHERE day >= current_date - %s"
        f"{scope} GROUP BY day, org_id ORDER BY day DESC, cost DESC LIMIT 500",
        [days, *params],
    )
