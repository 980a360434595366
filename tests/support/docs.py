"""Running the docs: the fenced code blocks of a Markdown page, and a runtime to run them on.

A ```python block runs; a ```python fragment block is an excerpt of code living in the
repository and does not. Blocks of one page run in order, in one namespace, so a page reads as
one script; a failure names the page and the block's first line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shared.config import Settings
from shared.runtime import Runtime, set_runtime

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.S | re.M)


def blocks(text: str) -> Iterator[tuple[int, str, str]]:
    """(first line, info string, source) of every fenced block."""
    for m in FENCE.finditer(text):
        yield text[: m.start()].count("\n") + 2, m.group(1).strip(), m.group(2)


def runnable(page: Path) -> list[tuple[int, str]]:
    """(first line, source) of the page's ```python blocks that are not fragments."""
    return [
        (line, source)
        for line, info, source in blocks(page.read_text())
        if info.split()[:1] == ["python"] and "fragment" not in info.split()[1:]
    ]


def run_page(page: Path, namespace: dict[str, Any]) -> None:
    for line, source in runnable(page):
        exec(compile(source, f"{page.name}:{line}", "exec"), namespace)


@contextmanager
def docs_runtime(settings: Settings, storage_root: Path) -> Iterator[Runtime]:
    """A runtime on the session's services with object storage under `storage_root` (pages
    store files), installed for the blocks' `.send()` and clients."""
    rt = Runtime(settings.model_copy(update={"storage_local_root": str(storage_root)}))
    previous = set_runtime(rt)
    try:
        yield rt
    finally:
        set_runtime(previous)
        from workers.export.wiring import set_exporter

        set_exporter(None)  # the export client caches one on the installed runtime
        rt.close()
