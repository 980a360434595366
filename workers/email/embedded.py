"""SMTP for `make run` (the email domain's service hook): the configured server when it
answers, else the dev sink.

The launcher calls `start(var, env, say)` before the fleet starts (registration `services`) and
stops the returned service at exit when it is embedded. The sink (`python -m workers.email.sink`,
a child process) accepts everything and keeps each message as `var/mail/*.eml` (`fleet email
inbox`). It listens where `SMTP_HOST`/`SMTP_PORT` say, so the processes, reading the same
settings, need nothing more in their environment.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from pathlib import Path

from shared.launcher import LaunchError
from shared.launcher.embedded import Service
from shared.launcher.net import wait_until
from shared.launcher.spawn import spawn, tail

from .settings import email_settings

#: Where the processes (and `fleet` in another terminal) find the server: the email settings.
_VARIABLES = ("SMTP_HOST", "SMTP_PORT")


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether an SMTP server greets (220) at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            return sock.recv(3) == b"220"
    except OSError:
        return False


def start(var: Path, env: dict[str, str], say: Callable[[str], None]) -> Service:
    """The launcher's hook: SMTP as the email settings (`SMTP_HOST`, `SMTP_PORT`) configure it."""
    settings = email_settings()
    return resolve(settings.smtp_host, settings.smtp_port, var, env=env)


def resolve(host: str, port: int, var_dir: Path, *, env: dict[str, str]) -> Service:
    """The server at host:port when it answers; else, on this machine, the dev sink started
    there (`LaunchError` for a remote server that does not answer)."""
    if answers(host, port):
        detail = (
            "from SMTP_HOST/SMTP_PORT"
            if "SMTP_HOST" in env or "SMTP_PORT" in env
            else "the default"
        )
        return Service(
            "SMTP", f"smtp://{host}:{port}", embedded=False, detail=detail, variables=_VARIABLES
        )
    if host not in ("127.0.0.1", "localhost"):
        raise LaunchError(f"SMTP server {host}:{port} does not answer (SMTP_HOST/SMTP_PORT)")
    maildir = var_dir / "mail"
    maildir.mkdir(parents=True, exist_ok=True)
    log = var_dir / "log" / "smtp-sink.log"
    argv = [
        sys.executable,
        "-m",
        "workers.email.sink",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--maildir",
        str(maildir),
    ]
    process = spawn(argv, env=env, log_path=log)
    if not wait_until(lambda: process.poll() is None and answers("127.0.0.1", port), timeout=15):
        process.kill()
        raise LaunchError(f"the dev SMTP sink did not start on port {port}:\n{tail(log)}")

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except Exception:
            process.kill()

    return Service(
        "SMTP sink",
        f"smtp://127.0.0.1:{port}",
        embedded=True,
        detail=f"mail kept in {maildir}",
        stop=stop,
        variables=_VARIABLES,
    )


__all__ = ["answers", "resolve", "start"]
