"""Starts and stops a group of worker processes with the `dramatiq` CLI, as production does
(`CeleryGroup`: with the `celery` CLI).

`dramatiq MODULE --processes P --threads T` forks P worker processes of T threads each. The idle
poll back-off of Dramatiq's consumer is read from the `dramatiq_worker_timeout` environment
variable (milliseconds; Dramatiq's default is 1000). A group is ready when every worker process
has logged "ready for action" (a Celery worker: once, when its P prefork processes are up);
its output goes to a log file that is shown when it fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from .sandbox import REPO, Sandbox

READY = re.compile(rb"ready for action")


class WorkerGroupError(RuntimeError):
    pass


class WorkerGroup:
    #: What each ready worker logs once, and how many such lines make the group ready.
    ready = READY

    def __init__(
        self,
        sandbox: Sandbox,
        app: str,
        *,
        processes: int,
        threads: int,
        worker_timeout_ms: int | None,
        log_path: Path,
    ) -> None:
        self.sandbox = sandbox
        self.app = app
        self.processes = processes
        self.threads = threads
        self.worker_timeout_ms = worker_timeout_ms
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> WorkerGroup:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "dramatiq", self.app,
            "--processes", str(self.processes), "--threads", str(self.threads),
        ]  # fmt: skip

    def ready_lines(self) -> int:
        return self.processes

    def start(self, timeout: float = 90.0) -> None:
        extra = {}
        if self.worker_timeout_ms is not None:
            extra["dramatiq_worker_timeout"] = str(self.worker_timeout_ms)
        cmd = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        offset = self._log.tell()  # count only this start's lines
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=self.sandbox.env(**extra),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as one, by its id
        )
        try:
            self._wait_ready(timeout, offset)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float, offset: int) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        ready = 0
        while ready < self.ready_lines():
            if self.proc.poll() is not None:
                raise WorkerGroupError(
                    f"{self.app} exited with {self.proc.returncode}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise WorkerGroupError(
                    f"{self.app} not ready after {timeout:.0f} s:\n{self.tail()}"
                )
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            # Count whole lines only; a partial last line is read again next time.
            complete = chunk[: chunk.rfind(b"\n") + 1]
            offset += len(complete)
            ready += len(self.ready.findall(complete))
            time.sleep(0.05)

    def worker_pids(self) -> list[int]:
        """The forked worker processes (children of the CLI's main process)."""
        assert self.proc is not None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(p) for p in children.read_text().split()]

    def stop(self, timeout: float = 60.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # graceful: the CLI stops its workers
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


class CeleryGroup(WorkerGroup):
    """`celery -A APP worker --pool prefork --concurrency P`: one main process and P forked
    worker processes, single-threaded each (`--threads` does not apply). Gossip, mingle and
    worker heartbeats (events between workers) are off: nothing listens to them here."""

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "celery", "-A", self.app, "worker",
            "--pool", "prefork", "--concurrency", str(self.processes),
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel", "WARNING", "--hostname", f"bench-{self.sandbox.run_id}@%h",
        ]  # fmt: skip

    def ready_lines(self) -> int:
        return 1
