"""AI cost per org and day from `ai_usage` (what the operator console's Tenants card shows)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

from shared.runtime import Runtime
from workers.ai.usage import OrgDayCost, Usage, cost_by_org_day, record

A, B = uuid.uuid4(), uuid.uuid4()


def test_cost_per_org_and_day_sums_the_models_of_the_window_scoped_to_the_orgs(
    runtime: Runtime,
) -> None:
    with runtime.pool.connection() as conn:
        today = conn.execute("SELECT current_date").fetchone()[0]  # type: ignore[index]
        calls = [
            (A, today, Usage("gpt-4o-mini", 100, 20, Decimal("0.00002700"))),
            (A, today, Usage("gpt-4o-mini", 50, 10, Decimal("0.00001350"))),
            (A, today, Usage("all-MiniLM-L6-v2", 30, 0, Decimal(0))),
            (B, today, Usage("gpt-4o", 1_000, 100, Decimal("0.00350000"))),
            (A, today - timedelta(days=1), Usage("gpt-4o-mini", 10, 5, Decimal("0.00000450"))),
            (B, today - timedelta(days=20), Usage("gpt-4o", 10, 10, Decimal("0.00012500"))),
        ]
        for org, day, spent in calls:
            record(conn, task_id=uuid.uuid4(), org_id=org, day=day, usage=spent)

        every = cost_by_org_day(conn, days=14)
        only_a = cost_by_org_day(conn, orgs=[A], days=14)
        longer = cost_by_org_day(conn, orgs=[B], days=30)

    assert every == [
        OrgDayCost(today, B, 1, 1_000, 100, Decimal("0.00350000"), "gpt-4o"),
        OrgDayCost(today, A, 3, 180, 30, Decimal("0.00004050"), "all-MiniLM-L6-v2, gpt-4o-mini"),
        OrgDayCost(today - timedelta(days=1), A, 1, 10, 5, Decimal("0.00000450"), "gpt-4o-mini"),
    ]
    assert only_a == every[1:]
    assert [(r.day, r.org_id) for r in longer] == [(today, B), (today - timedelta(days=20), B)]
