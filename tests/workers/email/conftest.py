from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.config import RetryPolicy, Settings
from shared.runtime import Runtime
from tests.support.env import test_env
from tests.support.inprocess import InProcessWorker, started_workers
from tests.support.wait import wait_for
from workers.email import actors
from workers.email.settings import EmailSettings, email_settings
from workers.email.sink import InboxItem, read_inbox
from workers.email.wiring import Mailer, build_mailer, set_mailer

from . import postfix as postfix_instance

#: The email policy (3 attempts) with backoffs short enough for tests but long enough that a
#: test can act between two attempts (start the server that was down).
EMAIL_RETRY = RetryPolicy(max_attempts=3, min_backoff_ms=1_000, max_backoff_ms=3_000)
SMTP_TIMEOUT_S = 2.0
#: The deferral schedule (4xx, server unreachable) shrunk from minutes and a day to seconds.
DEFER_MIN_S, DEFER_MAX_S, OUTAGE_WINDOW_S = 0.3, 1.0, 6.0
ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SmtpServer:
    """`tests.workers.email.smtp_server` in its own process."""

    def __init__(self, maildir: Path, port: int | None = None, slow_s: float = 4.0) -> None:
        self.maildir = maildir
        self.port = port or free_port()
        self.slow_s = slow_s
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> SmtpServer:
        cmd = [sys.executable, "-m", "tests.workers.email.smtp_server", "--port", str(self.port)]
        cmd += ["--maildir", str(self.maildir), "--slow-s", str(self.slow_s)]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env={**os.environ, **test_env()}, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip() == "READY", f"smtp server did not start: {line!r}"
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def messages(self, message_id: str | None = None) -> list[InboxItem]:
        items = read_inbox(self.maildir)
        return [i for i in items if message_id is None or i.message_id == message_id]


@pytest.fixture(scope="session")
def smtp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmtpServer]:
    server = SmtpServer(tmp_path_factory.mktemp("mail")).start()
    yield server
    server.stop()


#: How long the private Postfix's postgrey greylists a new (client, sender, recipient).
GREYLIST_DELAY_S = 3


@pytest.fixture(scope="session")
def postfix() -> Iterator[postfix_instance.Postfix]:
    """A private Postfix 3.x instance with postgrey (tests/workers/email/postfix.py)."""
    why_not = postfix_instance.available()
    if why_not:
        pytest.skip(why_not)
    # Not under pytest's tmp dir: that is private to root, and Postfix runs as `postfix`.
    directory = Path(tempfile.mkdtemp(prefix="jobfleet-postfix-"))
    server = postfix_instance.Postfix(directory, greylist_delay_s=GREYLIST_DELAY_S)
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def worker_settings(settings: Settings) -> Settings:
    """The kernel's settings of a test email worker: the email retry policy shrunk."""
    return settings.model_copy(update={"retries": {**settings.retries, "email": EMAIL_RETRY}})


def worker_email_settings(port: int, **overrides: object) -> EmailSettings:
    """The email settings of a test worker talking to SMTP on `port` (`overrides`: fields)."""
    return email_settings().model_copy(
        update={
            "smtp_port": port,
            "smtp_timeout_s": SMTP_TIMEOUT_S,
            "message_id_domain": "test.jobfleet",
            "defer_min_s": DEFER_MIN_S,
            "defer_max_s": DEFER_MAX_S,
            "outage_window_s": OUTAGE_WINDOW_S,
            **overrides,
        }
    )


class EmailWorker(InProcessWorker):
    """An in-process email worker (fleet middleware, real Redis) consuming the `email` queue."""

    def __init__(self, settings: Settings, email: EmailSettings, threads: int = 4) -> None:
        super().__init__(
            settings, service="test-email", bind=actors.bind, queues={"email"}, threads=threads
        )
        self.mailer: Mailer = build_mailer(self.runtime, email)

    def stop(self) -> None:
        super().stop()
        self.mailer.close()


@pytest.fixture
def make_email_worker(runtime: Runtime, settings: Settings) -> Iterator[object]:
    """Start an email worker talking to SMTP on `port`; stopped (and globals restored) after."""
    with started_workers(
        install=lambda worker: set_mailer(worker.mailer), uninstall=lambda: set_mailer(None)
    ) as start:
        yield lambda port, threads=4, **overrides: start(
            EmailWorker(
                worker_settings(settings), worker_email_settings(port, **overrides), threads=threads
            )
        )


@pytest.fixture
def email_worker(make_email_worker, smtp_server: SmtpServer) -> EmailWorker:  # type: ignore[no-untyped-def]
    return make_email_worker(smtp_server.port)  # type: ignore[no-any-return]


__all__ = ["SmtpServer", "free_port", "wait_for"]
