"""Parsing of command-line values: durations, payload arguments, status names, the operator."""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer

_UNITS = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([wdhms])")
_WHOLE = re.compile(r"(?:\d+[wdhms])+")


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `15m`, `45s`, `2w`, or a sum such as `1d12h`; at least one unit."""
    value = text.strip().lower()
    if not _WHOLE.fullmatch(value):
        raise typer.BadParameter(f"{text!r} is not a duration like 30d, 12h, 15m, 45s or 1d12h")
    seconds = sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(value))
    if seconds <= 0:
        raise typer.BadParameter(f"{text!r} must be longer than zero")
    return timedelta(seconds=seconds)


def load_payload(text: str) -> dict[str, Any]:
    """A JSON object given inline, or `@path` to read it from a file (`@-`: stdin)."""
    if text.startswith("@"):
        source = text[1:]
        try:
            raw = (
                typer.get_text_stream("stdin").read()
                if source == "-"
                else Path(source).read_text("utf-8")
            )
        except OSError as exc:
            raise typer.BadParameter(f"cannot read {source}: {exc.strerror}") from None
    else:
        raw = text
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise typer.BadParameter(f"the payload must be a JSON object, got {type(data).__name__}")
    return data


def one_of(value: str | None, choices: Sequence[str], *, option: str) -> str | None:
    """Case-insensitive choice (statuses are upper-case in the database)."""
    if value is None:
        return None
    upper = value.upper()
    if upper not in choices:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}", param_hint=option)
    return upper


def default_operator() -> str:
    """Who an audited operator action is attributed to: `$USER@host`."""
    user = os.environ.get("USER") or os.environ.get("LOGNAME")
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
    return f"{user}@{socket.gethostname()}"


def org_scope(org: Any, all_orgs: bool) -> Any:
    """The tenant a command on one job id is scoped to: `--org ORG`, or `--all-orgs` (None, the
    operator's unscoped view) said explicitly; a lookup by id never falls back to every org."""
    if org is not None and all_orgs:
        raise typer.BadParameter("give --org or --all-orgs, not both", param_hint="--org")
    if org is None and not all_orgs:
        raise typer.BadParameter(
            "give --org ORG (the job's tenant) or --all-orgs (operators: any tenant)",
            param_hint="--org",
        )
    return org
