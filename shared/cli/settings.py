"""`fleet config`: the settings this process would run with, secrets redacted.

Redacted: every setting whose name says it is a secret (password, secret, token, key,
kek, credential), passwords inside URLs (`scheme://user:***@host`) and secret-looking query
parameters (`?password=***`), wherever they appear, nested values included.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import typer

from . import output

MASK = "***"
SECRET_NAME = re.compile(
    r"(password|passwd|secret|token(?!s)|private|credential|api_?key|kek|(^|_)keys?$)", re.I
)
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+")


def redact_url(url: str) -> str:
    """Hide the password of `scheme://user:password@host/...` and secret query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if SECRET_NAME.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(name: str, value: Any) -> Any:
    """The value of setting `name` safe to print."""
    if value is None or value == "":
        return value
    if SECRET_NAME.search(name):
        return MASK
    if isinstance(value, str):
        return _URL.sub(lambda m: redact_url(m.group(0)), value)
    if isinstance(value, dict):
        return {k: redact(str(k), v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(name, v) for v in value]
    return value


def settings_rows() -> list[dict[str, Any]]:
    """Every setting, the kernel's then each domain's: name (its environment variable in lower
    case), environment variable, redacted value, description."""
    from shared.config import settings_for
    from shared.config_doc import env_name, settings_classes

    rows = []
    for settings_class in settings_classes():
        data = settings_for(settings_class).model_dump(mode="json")
        for name, field in settings_class.model_fields.items():
            env = env_name(name, field, settings_class)
            rows.append(
                {
                    "name": env.lower(),
                    "env": env,
                    "value": redact(env.lower(), data.get(name)),
                    "description": field.description or "",
                }
            )
    return rows


def config(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (name → value) instead of a table.")
    ] = False,
) -> None:
    """Show the current settings (from the environment and .env), secrets redacted."""
    rows = settings_rows()
    if as_json:
        output.print_json({row["name"]: row["value"] for row in rows})
        return
    output.print_table(
        ("env", "value", "description"),
        (
            (output.cell(r["env"]), output.cell(r["value"]), output.cell(r["description"]))
            for r in rows
        ),
        title="Settings",
        fold=("value", "description"),
    )
