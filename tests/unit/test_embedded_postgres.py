"""The embedded PostgreSQL runs as a system user under root: it must be able to reach its binaries."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.launcher.embedded.postgres import _unreachable_parent


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory under /tmp that others may traverse (pytest's tmp_path parents are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="jobfleet-reach-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_a_directory_others_cannot_traverse_is_named(open_dir: Path) -> None:
    hidden = open_dir / "checkout"
    (hidden / "venv" / "bin").mkdir(parents=True, mode=0o755)
    hidden.chmod(0o700)

    assert _unreachable_parent(hidden / "venv" / "bin" / "postgres", "nobody") == hidden


def test_traversable_parents_are_fine(open_dir: Path) -> None:
    (open_dir / "venv" / "bin").mkdir(parents=True, mode=0o755)

    assert _unreachable_parent(open_dir / "venv" / "bin" / "postgres", "nobody") is None
