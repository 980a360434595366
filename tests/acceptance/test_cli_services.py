"""The CLI says which Redis and Postgres it uses when the environment did not choose them (issue
31). Before: after the local fleet stopped, `fleet status` read 127.0.0.1:6379 and :5432 (maybe
another server's) without a word, and a mutating command acted on them the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import test_env

pytestmark = pytest.mark.slow

FLEET = Path(sys.executable).with_name("fleet")


def _fleet(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FLEET), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def test_defaults_are_named_and_configured_services_are_the_callers_choice(tmp_path: Path) -> None:
    bare = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    bare["VAR_DIR"] = str(tmp_path / "var")  # no local fleet running there

    for command in (("status", "--json"), ("dlq", "purge", "--older-than", "1d", "--dry-run")):
        done = _fleet(*command, env=bare, cwd=tmp_path)
        said = done.stderr.splitlines()[0]
        assert "REDIS_URL=redis://127.0.0.1:6379/0 (the default)" in said, done.stderr
        assert (
            "DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/jobfleet (the default)"
            in said
        )
        assert "set REDIS_URL and DATABASE_URL" in said

    (tmp_path / ".env").write_text("REDIS_URL=redis://127.0.0.1:6399/0\n")
    done = _fleet("status", "--json", env=bare, cwd=tmp_path)
    assert "REDIS_URL=redis://127.0.0.1:6399/0 (from .env)" in done.stderr.splitlines()[0]

    configured = {**os.environ, **test_env(), "VAR_DIR": str(tmp_path / "var")}
    done = _fleet("status", "--json", env=configured, cwd=tmp_path)
    assert "REDIS_URL" not in done.stderr and "DATABASE_URL" not in done.stderr
