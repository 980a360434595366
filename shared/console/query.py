"""The Runs search syntax: one line of terms over a run's fields, its payload and its error.

    status:DEAD job:billing:send_invoice payload.to:"a@example.com" timeout
    org:1f0c...  -status:COMPLETED  args.order_id:7  code:PROVIDER_OUTAGE  "connection refused"

- `field:value` for the fixed fields (`FIELDS`): exact match (`status` in any case).
- `payload.<path>:value` (or Oban's `args.<path>:value`): the JSON value at that path of the
  payload, by containment (`payload @> '{"to": "a@example.com"}'`), answered by the GIN index
  `ix_job_runs_console_payload` (jsonb_path_ops). An unquoted number or `true`/`false` also
  matches the same text as a string (`payload.order_id:7` finds 7 and "7"); a quoted value is a
  string only; a value also matches as an element of an array at that path.
- a bare word or a quoted phrase (or `error:value`): the error text contains it, any case
  (`ILIKE`, answered by the trigram index `ix_job_runs_console_error`); at least 3 characters.
- `-` before a term negates it. Terms of the same field (or payload path) are alternatives
  (`status:FAILED status:DEAD`); different fields, and bare words, must all hold.

`compile` turns the line into SQL conditions with their parameters, or raises `BadQuery` with
what is wrong and where: the console shows it above the form (no error page, nothing runs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ..jobs.statuses import RUN_STATUSES

#: Query field -> job_runs column (exact match).
FIELDS = {
    "id": "job_id",
    "org": "org_id",
    "job": "job_name",
    "status": "status",
    "queue": "queue",
    "entity": "entity_id",
    "request": "request_id",
    "code": "error_code",
}
PAYLOAD_PREFIXES = ("payload.", "args.")
#: A trigram index answers a substring of at least this many characters.
MIN_TEXT = 3
_TERM = re.compile(r'\s*(-?)(?:([A-Za-z_][\w.\-]*):)?("(?:[^"\\]|\\.)*"?|[^\s"]+)')
_PATH = re.compile(r"^[\w\-]+(\.[\w\-]+)*$")


class BadQuery(ValueError):
    """A search line the console cannot read: what is wrong, and where."""


#: How a payload or error-text condition is written so that no index answers it: when it
#: matches many runs, walking the runs in order and filtering is cheaper (`search.FUZZY_PROBE`).
PLAIN = {"payload": "(payload || '{}'::jsonb)", "error": "(error || '')"}


@dataclass
class Condition:
    sql: str
    params: list[Any]
    #: The same condition written so that no index answers it, for a payload or error-text
    #: one (the inverted indexes'); None for the others.
    plain: str | None = None


@dataclass
class Compiled:
    """The line's conditions (all must hold)."""

    conditions: list[Condition] = field(default_factory=list)

    @property
    def fuzzy(self) -> list[int]:
        """The conditions an inverted index answers (payload, error text), whose selectivity
        the planner cannot estimate."""
        return [i for i, c in enumerate(self.conditions) if c.plain is not None]

    def sql(self, frequent: frozenset[int] = frozenset()) -> tuple[list[str], list[Any]]:
        """The conditions, those in `frequent` written so that no index answers them."""
        where = [c.plain if i in frequent and c.plain else c.sql
                 for i, c in enumerate(self.conditions)]  # fmt: skip
        return where, [p for c in self.conditions for p in c.params]


def _value(raw: str, at: int) -> tuple[str, bool]:
    """The term's value, unquoted, and whether it was quoted."""
    if raw.startswith('"'):
        if not re.fullmatch(r'"(?:[^"\\]|\\.)*"', raw):
            raise BadQuery(f"unclosed quote at character {at + 1}: {raw}")
        return re.sub(r"\\(.)", r"\1", raw[1:-1]), True
    return raw, False


def _nest(path: list[str], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _candidates(value: str, quoted: bool) -> list[Any]:
    """The JSON values an operator means by `value` (see the module's docstring)."""
    if quoted:
        return [value]
    if value in ("true", "false"):
        return [value == "true", value]
    if value == "null":
        return [None]
    try:
        number = json.loads(value)
    except ValueError:
        return [value]
    return [number, value] if isinstance(number, (int, float)) else [value]


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _condition(name: str, value: str, quoted: bool, at: int) -> tuple[str, str, list[Any], bool]:
    """(group key, SQL, params, fuzzy) of one term."""
    if name.startswith(PAYLOAD_PREFIXES):
        path = name.split(".", 1)[1]
        if not _PATH.match(path):
            raise BadQuery(f"bad payload path {name!r} at character {at + 1}")
        keys = path.split(".")
        docs = [
            json.dumps(_nest(keys, shape)) for c in _candidates(value, quoted) for shape in (c, [c])
        ]
        sql = " OR ".join(["{payload} @> %s::jsonb"] * len(docs))
        return f"payload.{path}", f"({sql})", docs, True
    if name == "error":
        if len(value) < MIN_TEXT:
            raise BadQuery(
                f"error text {value!r} at character {at + 1}: at least {MIN_TEXT} characters"
            )
        return f"error:{value}", "{error} ILIKE %s", [_like(value)], True
    if name not in FIELDS:
        known = ", ".join([*FIELDS, "error", "payload.<path>", "args.<path>"])
        raise BadQuery(f"unknown field {name!r} at character {at + 1} (fields: {known})")
    column = FIELDS[name]
    if name == "org":
        try:
            value = str(UUID(value))
        except ValueError:
            raise BadQuery(f"org {value!r} at character {at + 1} is not a UUID") from None
    if name == "status":
        value = value.upper()
        if value not in RUN_STATUSES:
            raise BadQuery(
                f"unknown status {value!r} at character {at + 1}"
                f" (statuses: {', '.join(RUN_STATUSES)})"
            )
    return name, f"{column} = %s", [value], False


def compile(line: str) -> Compiled:
    """The search line as SQL conditions on `job_runs` (see the module's docstring)."""
    groups: dict[tuple[bool, str], list[tuple[str, list[Any], bool]]] = {}
    pos = 0
    line = line.rstrip()
    while pos < len(line):
        match = _TERM.match(line, pos)
        if match is None or match.end() == pos:
            raise BadQuery(f"cannot read the search at character {pos + 1}: {line[pos:]!r}")
        neg, name, raw = match.group(1) == "-", match.group(2), match.group(3)
        at = match.start(1)
        value, quoted = _value(raw, at)
        if not value:
            raise BadQuery(f"empty value at character {at + 1}")
        if name is None:  # a bare word or phrase: the error text; each one must hold
            key, sql, params, fuzzy = _condition("error", value, quoted, at)
            key = f"{key}#{len(groups)}"
        else:
            key, sql, params, fuzzy = _condition(name.lower(), value, quoted, at)
        groups.setdefault((neg, key), []).append((sql, params, fuzzy))
        pos = match.end()
    out = Compiled()
    for (neg, _), alternatives in groups.items():
        sql = " OR ".join(a[0] for a in alternatives)
        sql = f"({sql})" if len(alternatives) > 1 else sql
        sql = f"NOT ({sql})" if neg else sql
        params = [p for a in alternatives for p in a[1]]
        fuzzy = not neg and all(a[2] for a in alternatives)
        out.conditions.append(
            Condition(
                sql.format(payload="payload", error="error"),
                params,
                sql.format(**PLAIN) if fuzzy else None,
            )
        )
    return out
