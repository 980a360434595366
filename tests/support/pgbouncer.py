"""A private PgBouncer in transaction pooling mode, in front of the test Postgres.

    start(target) -> PgBouncer      # a context manager: `.url` (no database), `.stop()`
    python -m tests.support.pgbouncer -- make test PYTEST_ARGS="tests/integration"

It listens on a free loopback port, trusts the user (named in its userlist), and serves every
database name (`*`) from the target server, so the test session can create, use and drop its
own `jobfleet_test_<id>`. The command form runs the command with `TEST_POSTGRES_URL` pointing
at it and `DATABASE_POOLER=transaction` (.ci/pgbouncer-tests).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import psycopg
from sqlalchemy.engine import make_url

from shared.launcher.net import free_port

DEFAULT_TARGET = "postgresql+psycopg://postgres@127.0.0.1:5432"


def binary() -> str | None:
    return shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None
    )


@dataclass
class PgBouncer:
    url: str  # SQLAlchemy form, without a database (the test URLs' form)
    port: int
    process: subprocess.Popen[bytes]
    directory: Path

    def dsn(self, database: str = "postgres") -> str:
        return f"{self.url.replace('postgresql+psycopg://', 'postgresql://', 1)}/{database}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> PgBouncer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def config(target: str, port: int, directory: Path, *, pool_size: int) -> str:
    url = make_url(target)
    return f"""\
[databases]
* = host={url.host or "127.0.0.1"} port={url.port or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {directory / "userlist.txt"}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 2000
server_lifetime = 3600
logfile = {directory / "pgbouncer.log"}
admin_users = {url.username or "postgres"}
log_connections = 0
log_disconnections = 0
"""


def start(target: str = DEFAULT_TARGET, *, pool_size: int = 20, timeout: float = 10) -> PgBouncer:
    """Start PgBouncer on a free loopback port in front of `target` (a URL without database)."""
    exe = binary()
    if exe is None:
        raise RuntimeError("pgbouncer is not installed: bash shared/install_test_pgbouncer.sh")
    user = make_url(target).username or "postgres"
    directory = Path(tempfile.mkdtemp(prefix="jobfleet-pgbouncer-"))
    port = free_port()
    (directory / "userlist.txt").write_text(f'"{user}" ""\n')
    (directory / "pgbouncer.ini").write_text(config(target, port, directory, pool_size=pool_size))
    argv = [exe, str(directory / "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root: it switches to this user
        argv[1:1] = ["-u", "postgres" if _user_exists("postgres") else "nobody"]
        directory.chmod(0o777)
        for path in directory.iterdir():
            path.chmod(0o644)
    # Its log goes to `logfile` and to stderr: stderr to a file, never an unread pipe (a full
    # pipe blocks PgBouncer in write(2), every client with it).
    with open(directory / "stderr.log", "wb") as stderr:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)
    bouncer = PgBouncer(f"postgresql+psycopg://{user}@127.0.0.1:{port}", port, process, directory)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            err = (directory / "stderr.log").read_text(errors="replace")
            bouncer.stop()
            raise RuntimeError(f"pgbouncer exited ({process.returncode}): {err}{bouncer.log()}")
        try:
            with psycopg.connect(bouncer.dsn(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return bouncer
        except psycopg.Error:
            if time.monotonic() > deadline:
                log = bouncer.log()
                bouncer.stop()
                raise RuntimeError(f"pgbouncer did not answer in {timeout} s: {log}") from None
            time.sleep(0.1)


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def main(argv: list[str]) -> int:
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    target = os.environ.get("TEST_POSTGRES_URL", DEFAULT_TARGET)
    with start(target) as bouncer:
        print(
            f"pgbouncer (transaction pooling) on 127.0.0.1:{bouncer.port} -> {make_url(target).host}:{make_url(target).port or 5432}",
            flush=True,
        )
        env = {**os.environ, "TEST_POSTGRES_URL": bouncer.url, "DATABASE_POOLER": "transaction"}
        return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
