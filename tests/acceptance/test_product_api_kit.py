"""The example API's own test suite (examples/product_api/tests: the jobfleet test kit) passes
with no Redis and no Postgres: their URLs point at closed ports, and the root conftest (which
would set up services) is not loaded."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import free_port

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "examples" / "product_api"

pytestmark = pytest.mark.slow


def test_the_example_api_suite_passes_with_redis_and_postgres_unreachable() -> None:
    redis_port, pg_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEST_", "PYTEST_"))},
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "DATABASE_URL": f"postgresql+psycopg://postgres@127.0.0.1:{pg_port}/nowhere",
        "PYTHONPATH": str(ROOT),
    }

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", str(SUITE / "pytest.ini"),
         "--rootdir", str(SUITE), str(SUITE / "tests")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b\d+ passed", done.stdout) and "skipped" not in done.stdout
