"""`make lint`'s import contracts (pyproject `[tool.importlinter]`, DESIGN §1) catch a forbidden
import: run `lint-imports` on a copy of the packages with one bad import added."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("shared", "chain", "workers", "scheduler", "examples")


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contracts")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules", "tests")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, root / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "250"}  # a contract on one line
    return subprocess.run(
        [str(LINT), "--config", "pyproject.toml", "--no-cache"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("where", "line", "contract"),
    [
        ("shared/_bad.py", "import workers.email.store", "The kernel imports no domain"),
        ("shared/_bad.py", "import scheduler.chain.keeper", "The kernel imports no domain"),
        ("workers/ai/_bad.py", "import workers.doc.client", "Domains are independent"),
        (
            "scheduler/_bad.py",
            "import workers.email.store",
            "only its producer surface is imported",
        ),
        ("shared/_bad.py", "import chain.client", "The kernel imports no domain"),
        ("chain/_bad.py", "import workers.chain_actions.jobs", "The EVM library (chain) builds on"),
        ("workers/email/_bad.py", "import chain.client", "The EVM library is the chain slices'"),
    ],
)
def test_a_forbidden_import_breaks_the_lint(
    copy: Path, where: str, line: str, contract: str
) -> None:
    bad = copy / where
    bad.write_text(f"{line}  # a forbidden import\n")
    try:
        done = lint(copy)
    finally:
        bad.unlink()
    assert done.returncode != 0, done.stdout
    broken = [ln for ln in done.stdout.splitlines() if " BROKEN" in ln]
    assert len(broken) == 1 and contract in broken[0], done.stdout
    assert f"{where[:-3].replace('/', '.')} ->" in done.stdout


def test_the_tree_as_it_is_keeps_every_contract(copy: Path) -> None:
    done = lint(copy)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 5 kept, 0 broken." in done.stdout
