"""The email domain's part of the operator console (`shared/console/plugins.py`; its
registration's `console`): the suppressed addresses on the Tenants page, scoped to the
operator's orgs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from shared.console.plugins import Panel, org_scope, present, rows
from shared.runtime import Runtime

NAME = "email"
TEMPLATES = Path(__file__).parent / "templates" / "console"


def tenant_panel(runtime: Runtime, orgs: Sequence[UUID]) -> Panel:
    """The latest suppressions (None: the table is not migrated)."""
    have = present(runtime, "email_suppressions")["email_suppressions"]
    return "email/suppressions.html", {
        "suppressions": suppressions(runtime, orgs=orgs) if have else None
    }


def overview_panel(runtime: Runtime, orgs: Sequence[UUID]) -> Panel | None:
    """The emails the SMTP relay holds back for refusing the fleet's configuration (a rotated
    password, STARTTLS now required): a red card while there are any, nothing otherwise."""
    from . import relay_faults

    if not present(runtime, "scheduled_emails")["scheduled_emails"]:
        return None
    with runtime.pool.connection() as conn:
        faults = relay_faults.held(conn, list(orgs))
    if not faults:
        return None
    return "email/relay_faults.html", {"faults": faults}


def suppressions(
    runtime: Runtime, *, orgs: Sequence[UUID] = (), limit: int = 100
) -> list[dict[str, Any]]:
    scope, params = org_scope(orgs)
    return rows(
        runtime,
        "SELECT org_id, email, reason, detail, created_at FROM email_suppressions"
        f" WHERE TRUE{scope} ORDER BY created_at DESC LIMIT %s",
        [*params, limit],
    )
