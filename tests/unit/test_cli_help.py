"""`fleet --help` groups its commands: the fleet's own (`run`, `web`, `schedule` among them)
apart from the domains' (issue 32: `run`, `web` and `schedule` were listed under "Domains")."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from shared.cli.main import app


def panels() -> dict[str, list[str]]:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "120"}, color=False).output
    found: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        heading = re.match(r"^╭─ (\w+) ", line)
        if heading:
            current = heading.group(1)
            found[current] = []
        elif current and (row := re.match(r"^│ (\w[\w-]*)\s{2,}", line)):
            found[current].append(row.group(1))
    return found


def test_the_fleets_own_commands_are_not_listed_as_domains() -> None:
    found = panels()
    assert {"run", "web", "schedule", "jobs", "dlq", "queues"} <= set(found["Commands"])
    assert {"email", "ai", "export", "doc", "chain"} <= set(found["Domains"])
    assert not {"run", "web", "schedule"} & set(found["Domains"])
