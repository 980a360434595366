"""Fixtures of the process-level tests: worker processes, private Redis, execution marks; the
storage backends (tests/support/storage.py) for the storage port's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import jobs
from tests.support.procs import procs
from tests.support.storage import local_storage, s3_server, s3_storage


@pytest.fixture
def marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """In-process executions of the test jobs are appended to this file."""
    path = tmp_path / "inproc-marks.txt"
    path.touch()
    monkeypatch.setattr(jobs, "MARKS", str(path))
    return path


__all__ = ["local_storage", "marks", "procs", "s3_server", "s3_storage"]
