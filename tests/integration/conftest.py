"""Fixtures of the process-level tests: worker processes, private Redis, execution marks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.runtime import Runtime
from tests.support import jobs
from tests.support.procs import Procs


@pytest.fixture
def procs(runtime: Runtime, tmp_path: Path) -> Iterator[Procs]:
    """Worker processes (and private servers) of one test, all stopped at its end."""
    started = Procs(tmp_path)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """In-process executions of the test jobs are appended to this file."""
    path = tmp_path / "inproc-marks.txt"
    path.touch()
    monkeypatch.setattr(jobs, "MARKS", str(path))
    return path
