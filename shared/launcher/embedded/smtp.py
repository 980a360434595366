"""SMTP for `make run`: the configured server when it answers, else the dev sink.

The sink (`python -m workers.email.sink`, started as a child process: the kernel imports no
worker) accepts everything and keeps each message as `var/mail/*.eml` (`fleet email inbox`).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from .. import LaunchError
from ..net import wait_until
from ..spawn import spawn, tail
from . import Service


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            return sock.recv(3) == b"220"
    except OSError:
        return False


def resolve(host: str, port: int, var_dir: Path, *, env: dict[str, str]) -> Service:
    if answers(host, port):
        detail = (
            "from SMTP_HOST/SMTP_PORT"
            if "SMTP_HOST" in env or "SMTP_PORT" in env
            else "the default"
        )
        return Service("SMTP", f"smtp://{host}:{port}", embedded=False, detail=detail)
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
    )
