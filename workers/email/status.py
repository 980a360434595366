"""The email domain's section of `fleet status` (its `Domain.status`): the emails the SMTP relay
holds back because it refuses the fleet's configuration (`relay_faults.py`), in red."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.cli.status import Section, guard

from . import relay_faults

if TYPE_CHECKING:
    from rich.console import Console

    from shared.config import Settings


def sections(settings: Settings, metrics: str | None) -> dict[str, Section]:
    return {"email": {"relay_faults": guard(lambda: _faults(settings))}}


def _faults(settings: Settings) -> Section:
    import psycopg

    with psycopg.connect(settings.database_dsn, connect_timeout=2, autocommit=True) as conn:
        try:
            faults = relay_faults.held(conn)
        except psycopg.errors.UndefinedTable:
            return {"faults": [], "note": "the email domain is not migrated"}
    return {"faults": faults}


def render(report: dict[str, Section], out: Console) -> None:
    from shared.cli.output import cell

    section: dict[str, Any] = report.get("email", {}).get("relay_faults", {})
    if "error" in section:
        out.print(f"[yellow]email relay: {cell(section['error'])}[/yellow]")
        return
    faults = section.get("faults") or []
    if not faults:
        out.print("[bold]email relay[/bold]: no email held by a relay fault")
        return
    for fault in faults:
        out.print(
            f"[red]email relay refuses the fleet's configuration[/red]: {fault['emails']} "
            f"email(s) held, {cell(fault['code'])}, last at {cell(fault['last_at'])}: "
            f"{cell(fault['error'])}"
        )
