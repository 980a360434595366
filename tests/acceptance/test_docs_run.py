"""The docs tell the truth: every code block a user would copy runs in the test suite.

- Every ```python block of README.md and docs/*.md runs, in order and in one namespace per
  page, against this session's Redis and Postgres; a block that is an excerpt of code living
  in the repository, not something to run, says so: ```python fragment. A page with its own
  test (docs/producers.md: test_producer_docs.py) is run there.
- What those blocks enqueue is what the workers take: an email's variables are its template's.
- Every `fleet ...` command line in a code block or code span names a command and options
  that exist (the placeholders in CAPITALS or <angle brackets> stand for values).

Before: docs/kernel.md's producer example used names it never defined and a template variable
(`name`) that the template does not have (`NAME`), and nothing ran it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from shared.config import Settings
from shared.runtime import Runtime
from tests.support import docs

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Pages whose blocks a dedicated test runs (with the fixtures they need).
OWN_TEST = {"producers.md": "tests/acceptance/test_producer_docs.py"}
SPAN = re.compile(r"`(fleet [^`]+)`")


@pytest.fixture
def docs_runtime(runtime: Runtime, settings: Settings, tmp_path: Path) -> Iterator[Runtime]:
    with docs.docs_runtime(settings, tmp_path) as rt:
        yield rt


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if p.name not in OWN_TEST and docs.runnable(p)],
    ids=lambda p: p.name,
)
def test_every_python_block_of_the_page_runs_in_order(
    page: Path, docs_runtime: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    docs.run_page(page, {"__name__": page.stem.replace("-", "_")})
    assert docs_runtime.settle()

    # What the blocks sent is what a worker accepts: an email's variables are its template's.
    from workers.email.client import template_variables

    ns = docs_runtime.settings.broker_namespace
    client = docs_runtime.broker.client  # type: ignore[attr-defined]
    for data in client.hvals(f"{ns}:email.msgs"):
        payload = json.loads(data)["args"][0]
        wanted = set(template_variables(payload["template_key"]))
        assert wanted <= set(payload["variables"]), (page.name, payload["variables"], wanted)


def test_the_kernel_page_has_runnable_blocks() -> None:
    """The extraction works (a fence typo would otherwise run nothing and pass)."""
    assert len(docs.runnable(ROOT / "docs" / "kernel.md")) >= 2


def _command(path: list[str]) -> tuple[Any, list[str]]:
    """The click command a `fleet` line names, and the words left for its arguments."""
    from shared.cli import lazy
    from shared.cli.main import KERNEL_APPS, app
    from shared.domains import commands

    lazy_apps = {name: target for name, (target, _) in KERNEL_APPS.items()}
    lazy_apps.update({c.name: c.target for c in commands()})
    command: Any = typer.main.get_command(app)
    words = list(path)
    if words and words[0] in lazy_apps:
        command = lazy.to_command(lazy.load(lazy_apps[words.pop(0)]))
    while words and hasattr(command, "list_commands"):  # a group (typer's own click)
        sub = command.get_command(command.context_class(command), words[0])
        if sub is None:
            raise AssertionError(f"no command {words[0]!r} under {command.name!r}")
        command, words = sub, words[1:]
    return command, words


def fleet_lines() -> list[tuple[str, str]]:
    """(where, line) of every `fleet ...` command in a code block or code span."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for line, _, source in docs.blocks(text):
            for n, row in enumerate(source.splitlines()):
                row = row.split("#", 1)[0].strip()
                row = row.removeprefix(".venv/bin/")
                if row.startswith("fleet "):
                    found.append((f"{page.name}:{line + n}", row))
        for m in SPAN.finditer(text):
            found.append((f"{page.name}:{text[: m.start()].count(chr(10)) + 1}", m.group(1)))
    return found


def test_every_fleet_command_in_the_docs_exists_with_its_options() -> None:
    lines = fleet_lines()
    assert len(lines) >= 20
    for where, line in lines:
        words = shlex.split(line.replace("[", " ").replace("]", " "))[1:]
        path = []
        for word in words:
            if word.startswith("-") or word.startswith("<") or not word.islower():
                break
            path.append(word)
        command, _ = _command(path)
        options = {opt for p in command.params for opt in p.opts + p.secondary_opts}
        for word in words:
            name = word.split("=", 1)[0]
            if name.startswith("--"):
                assert name in options, f"{where}: `{line}`: {name} is no option of it"
