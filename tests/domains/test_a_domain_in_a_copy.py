"""A domain is a folder and an entry point, the repository's own checks included (issue 33).

Adding `notes_domain/jf_notes` to a copy of this repository left 13 unit tests failing: the
compose and Kubernetes entries (a new process, and the scheduler's health port it shifts), the
schema snapshots, the README's settings, the id vectors, a Makefile target. Here the copy gets
the domain (installed as pip would: a `.dist-info` with its entry point, on `PYTHONPATH`), the
steps docs/domains.md lists are run, and then the whole unit suite must pass in the copy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import test_env

HERE = Path(__file__).parent
NOTES = HERE / "notes_domain"
ROOT = HERE.parents[1]
BIN = Path(sys.executable).parent

# The copy's whole unit suite (~20 s alone) beside five other test processes on 2 cores.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def copy_of_the_repository(where: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if name.startswith("node_modules/") or not source.is_file():
            continue
        target = where / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    (where / "node_modules").symlink_to(ROOT / "node_modules")  # the pinned solc and anvil
    return where


def test_a_new_domain_passes_the_whole_unit_suite_after_the_documented_steps(
    tmp_path: Path,
) -> None:
    copy = copy_of_the_repository(tmp_path / "repo")
    env = {
        **os.environ,
        **test_env(),
        "PYTHONPATH": os.pathsep.join([str(copy), str(NOTES)]),
    }
    # The copy's processes (three `fleet`, the vectors, the suite) share their compiled modules:
    # the copy is a scratch directory, the bytecode they write stays in it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=copy, env=env, capture_output=True, text=True, timeout=300, check=False
        )

    # The copy does not follow its registrations yet, and `--check` says which files differ.
    before = run(str(BIN / "fleet"), "repo", "sync", "--check")
    assert before.returncode == 1, before.stdout + before.stderr
    for expected in ("compose/docker-compose.yml", "compose/k8s/base/worker-notes.yaml"):
        assert expected in before.stdout

    # docs/domains.md, "Adding a sixth domain": the repository's files, then the id vectors.
    synced = run(str(BIN / "fleet"), "repo", "sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    vectors = run(sys.executable, "-m", "tests.vectors.generate")
    assert vectors.returncode == 0, vectors.stdout + vectors.stderr
    assert run(str(BIN / "fleet"), "repo", "sync", "--check").returncode == 0

    # In one process: beside the outer suite's processes on 2 cores, two xdist processes only
    # imported and collected it twice (this test: 28 s of CPU with -n 2, 24 s in one process).
    unit = ["tests/unit", "-q", "-p", "no:xdist", "-p", "no:cacheprovider"]
    suite = run(sys.executable, "-m", "pytest", *unit)
    assert suite.returncode == 0, suite.stdout[-6000:] + suite.stderr[-2000:]
    assert " passed" in suite.stdout and "failed" not in suite.stdout
