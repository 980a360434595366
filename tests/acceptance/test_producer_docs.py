"""docs/producers.md runs: its ```python blocks, in order and in one namespace, against this
session's Redis and Postgres; and its tables say what the code says (templates, export types)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.config import Settings
from shared.runtime import Runtime
from tests.support import docs
from workers.email.client import template_keys, template_variables
from workers.export.client import export_types

DOC = Path(__file__).resolve().parents[2] / "docs" / "producers.md"


@pytest.fixture
def docs_runtime(runtime: Runtime, settings: Settings, tmp_path: Path) -> Iterator[Runtime]:
    """The session's services, object storage under tmp_path (the docs store a PDF)."""
    with docs.docs_runtime(settings, tmp_path) as rt:
        yield rt


def test_every_python_block_of_the_producer_docs_runs_in_order(
    docs_runtime: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    assert len(docs.runnable(DOC)) >= 10, "the extraction found too few blocks"
    docs.run_page(DOC, {"__name__": "producers_md"})

    printed = capsys.readouterr().out
    assert "QUEUED email:send" in printed  # the run the docs follow after the relay


def table_rows(text: str, heading: str) -> dict[str, str]:
    """First-column -> second/last cells of the first table after `heading`."""
    section = text[text.index(heading) :]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[-1]
        elif rows and not line.startswith("|"):
            break
    return rows


def test_the_template_table_lists_every_template_and_its_variables() -> None:
    rows = table_rows(DOC.read_text(), "| template_key | variables |")

    assert set(rows) == set(template_keys())
    for key, cell in rows.items():
        assert re.findall(r"`(\w+)`", cell) == template_variables(key), key


def test_the_export_table_lists_every_type_and_its_filters() -> None:
    rows = table_rows(DOC.read_text(), "| type | what | date column | filters |")

    assert set(rows) == set(export_types())
    for name, cell in rows.items():
        assert re.findall(r"`(\w+)`", cell) == list(export_types()[name]["filters"]), name
