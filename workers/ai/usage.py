"""Cost accounting: price per call, `ai_usage` per org/model/UTC day, Prometheus counters.

Every provider call is recorded when it returns, before its output is used: a task that fails
afterwards (invalid JSON after the repair, a crash) has still cost what it cost. The call's
tokens are added to the task row and to the day's `ai_usage` row in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any
from uuid import UUID

import psycopg
import structlog
from prometheus_client import Counter

TOKENS = Counter(
    "jobfleet_ai_tokens_total",
    "AI tokens by org, model and direction",
    ["org", "model", "direction"],
)
COST = Counter("jobfleet_ai_cost_total", "AI cost in USD by org and model", ["org", "model"])
REQUESTS = Counter(
    "jobfleet_ai_requests_total",
    "AI provider calls by org, model and outcome",
    ["org", "model", "outcome"],
)

log = structlog.get_logger("jobfleet.ai")
MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Usage:
    model: str
    tokens_in: int
    tokens_out: int
    cost: Decimal

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


def price(
    prices: dict[str, dict[str, float]], model: str, tokens_in: int, tokens_out: int
) -> Decimal:
    """USD for one call at `prices[model]` (per million tokens); an unknown model costs 0.

    A provider may answer with a dated variant (`gpt-4o-mini-2024-07-18`): the longest price
    key that prefixes the model name applies.
    """
    table = prices.get(model)
    if table is None:
        keys = [k for k in prices if model.startswith(k + "-")]
        table = prices[max(keys, key=len)] if keys else None
    if table is None:
        return Decimal(0)
    cost = (
        Decimal(str(table.get("input", 0))) * tokens_in
        + Decimal(str(table.get("output", 0))) * tokens_out
    ) / MILLION
    return cost.quantize(Decimal("0.00000001"))


def record(
    conn: psycopg.Connection[Any], *, task_id: UUID, org_id: UUID, day: date, usage: Usage
) -> None:
    """Add one call to the task's totals and to the org's day (in the caller's transaction)."""
    conn.execute(
        "UPDATE ai_tasks SET calls = calls + 1, tokens_in = tokens_in + %s, "
        "tokens_out = tokens_out + %s, cost = cost + %s, model = %s, updated_at = now() "
        "WHERE id = %s AND org_id = %s",
        (usage.tokens_in, usage.tokens_out, usage.cost, usage.model, task_id, org_id),
    )
    conn.execute(
        "INSERT INTO ai_usage (org_id, model, day, requests, tokens_in, tokens_out, cost) "
        "VALUES (%s, %s, %s, 1, %s, %s, %s) "
        "ON CONFLICT (org_id, model, day) DO UPDATE SET requests = ai_usage.requests + 1, "
        "tokens_in = ai_usage.tokens_in + EXCLUDED.tokens_in, "
        "tokens_out = ai_usage.tokens_out + EXCLUDED.tokens_out, "
        "cost = ai_usage.cost + EXCLUDED.cost, updated_at = now()",
        (org_id, usage.model, day, usage.tokens_in, usage.tokens_out, usage.cost),
    )


def count(org_id: UUID, usage: Usage) -> None:
    """The Prometheus side of one call (after its usage is durable)."""
    org = str(org_id)
    TOKENS.labels(org, usage.model, "in").inc(usage.tokens_in)
    TOKENS.labels(org, usage.model, "out").inc(usage.tokens_out)
    COST.labels(org, usage.model).inc(float(usage.cost))
    REQUESTS.labels(org, usage.model, "ok").inc()


def tokens_on(conn: psycopg.Connection[Any], org_id: UUID, day: date) -> int:
    """The org's recorded tokens of `day` (seeds the Redis counter when it was lost)."""
    row = conn.execute(
        "SELECT COALESCE(SUM(tokens_in + tokens_out), 0) FROM ai_usage WHERE org_id = %s AND day = %s",
        (org_id, day),
    ).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class UsageRow:
    day: date
    model: str
    requests: int
    tokens_in: int
    tokens_out: int
    cost: Decimal


def report(
    conn: psycopg.Connection[Any], org_id: UUID, since: date, until: date | None = None
) -> list[UsageRow]:
    """Usage of one org from `since` (inclusive), by day and model."""
    rows = conn.execute(
        "SELECT day, model, requests, tokens_in, tokens_out, cost FROM ai_usage "
        "WHERE org_id = %s AND day >= %s AND (%s::date IS NULL OR day <= %s::date) ORDER BY day, model",
        (org_id, since, until, until),
    ).fetchall()
    return [UsageRow(*row) for row in rows]


@dataclass(frozen=True)
class OrgDayCost:
    day: date
    org_id: UUID
    requests: int
    tokens_in: int
    tokens_out: int
    cost: Decimal
    models: str  # the day's models, comma-separated


def cost_by_org_day(
    conn: psycopg.Connection[Any], *, orgs: Sequence[UUID] = (), days: int = 14, limit: int = 500
) -> list[OrgDayCost]:
    """AI cost per org and UTC day over the last `days` days, every model summed, latest day
    first and the costliest org first within it (the operator console's Tenants card). `orgs`
    scopes it (empty: every org); at most `limit` rows."""
    scope = " AND org_id = ANY(%s)" if orgs else ""
    rows = conn.execute(
        "SELECT day, org_id, sum(requests), sum(tokens_in), sum(tokens_out), sum(cost),"
        " string_agg(DISTINCT model, ', ') FROM ai_usage WHERE day >= current_date - %s"
        f"{scope} GROUP BY day, org_id ORDER BY day DESC, sum(cost) DESC LIMIT %s",
        [days, *([list(orgs)] if orgs else []), limit],
    ).fetchall()
    return [OrgDayCost(*row) for row in rows]
