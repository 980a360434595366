"""A sixth domain added without touching `shared/` (issue 17): `notes_domain/jf_notes`.

It is installed the way pip would (a `.dist-info` with its `jobfleet.domains` entry point, on
`PYTHONPATH`), then everything the kernel offers a domain is used for real, in subprocesses:
its CLI under `fleet`, its settings in `fleet config` and the README's tables, its row in the
launcher's plan, its migration under `fleet db upgrade`, its retry policy, and its worker
(`dramatiq jf_notes.app`) running its own job to COMPLETED on the session's Redis and Postgres.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.env import BASE_PG, test_env
from tests.support.procs import Proc
from tests.support.wait import wait_for

HERE = Path(__file__).parent
NOTES = HERE / "notes_domain"
ROOT = HERE.parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


def env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(NOTES), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **test_env(), "PYTHONPATH": path, **extra}


def run(*argv: str, **extra: str) -> str:
    done = subprocess.run(
        argv, env=env(**extra), cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def fleet(*args: str, **extra: str) -> str:
    return run(str(BIN / "fleet"), *args, **extra)


def test_the_kernel_does_not_know_the_notes_domain() -> None:
    named = re.compile(r"jf_notes|[\"']notes[:\"']|NOTES_")
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "shared").rglob("*")
        if path.is_file()
        and path.suffix in (".py", ".html", ".lua", ".toml", ".json", ".sql", ".mako")
        and named.search(path.read_text(errors="replace"))
    ]
    assert offenders == []


def test_its_cli_settings_and_process_come_from_its_registration() -> None:
    assert "notes" in fleet("--help")
    assert fleet("notes", "limits").strip() == "max words: 1000"
    assert fleet("notes", "limits", NOTES_MAX_WORDS="7").strip() == "max words: 7"
    config = json.loads(fleet("config", "--json", NOTES_MAX_WORDS="7"))
    assert config["notes_max_words"] == 7
    tables = run(sys.executable, "-m", "shared.config_doc")
    assert "`jf_notes.settings.NotesSettings`" in tables and "`NOTES_MAX_WORDS`" in tables
    names = run(sys.executable, "-m", "shared.launcher", "names").split()
    assert "worker-notes" in names
    assert names.index("worker-notes") < names.index("scheduler")  # its order: 60
    command = run(sys.executable, "-m", "shared.launcher", "command", "worker-notes")
    assert " jf_notes.app --processes 1 " in command and "/dramatiq " in command
    policy = run(
        sys.executable, "-c",
        "from shared.config import get_settings; print(get_settings().retry_policy('notes'))",
    )  # fmt: skip
    assert "max_attempts=2" in policy and "min_backoff_ms=100" in policy


@pytest.fixture
def scratch_db() -> Iterator[str]:
    """A database of its own: the session's must not record a revision that the other tests'
    processes (without this domain) cannot resolve."""
    name = f"jf_notes_{uuid.uuid4().hex[:8]}"
    yield f"{BASE_PG}/{name}"
    admin = BASE_PG.replace("postgresql+psycopg://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def test_its_migration_runs_with_the_kernels(scratch_db: str) -> None:
    fleet("db", "upgrade", DATABASE_URL=scratch_db)
    with psycopg.connect(dsn(scratch_db)) as conn:
        heads = {r[0] for r in conn.execute("SELECT version_num FROM alembic_version")}
        assert "n001_notes" in heads
        assert conn.execute("SELECT to_regclass('notes')").fetchone() == ("notes",)
        assert conn.execute("SELECT to_regclass('job_runs')").fetchone() == ("job_runs",)


def test_its_worker_runs_its_job(scratch_db: str, tmp_path: Path) -> None:
    # A database migrated before the domain was installed is behind once it is: its producer
    # refuses to send until `fleet db upgrade` applies the domain's revision.
    without = {**os.environ, **test_env(), "DATABASE_URL": scratch_db}
    subprocess.run(
        [str(BIN / "fleet"), "db", "upgrade"], env=without, cwd=ROOT, check=True,
        capture_output=True, timeout=120,
    )  # fmt: skip
    refused = subprocess.run(
        [str(BIN / "fleet"), "notes", "index", "too early"],
        env=env(DATABASE_URL=scratch_db), cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 1 and "missing: n001_notes" in refused.stderr, refused.stderr
    fleet("db", "upgrade", DATABASE_URL=scratch_db)
    worker = Proc(
        [str(BIN / "dramatiq"), "jf_notes.app", "--processes", "1", "--threads", "2"],
        env=env(DATABASE_URL=scratch_db),
        log_path=tmp_path / "worker-notes.log",
    )
    try:
        job_id = fleet("notes", "index", "three little words", DATABASE_URL=scratch_db).strip()
        assert job_id.startswith("00000000-0000-0000-0000-000000000000:notes:index:"), job_id

        def completed() -> Any:
            assert worker.alive(), worker.log()[-3000:]
            with psycopg.connect(dsn(scratch_db)) as conn:
                return conn.execute(
                    "SELECT status, queue, result FROM job_runs WHERE job_id = %s", (job_id,)
                ).fetchone()

        row = wait_for(lambda: (r := completed()) and r[0] == "COMPLETED" and r, timeout=30)
        assert row[1] == "notes" and row[2] == {"words": 3}
    finally:
        worker.close()
