"""Real processes for tests: Dramatiq worker processes and a private `redis-server`.

Every process is started in its own session (process group), logs to a file under the test's
tmp dir, and its whole group is killed by `Procs.close()` (the `procs` fixture) even when the
test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from shared.runtime import Runtime
from tests.support.env import test_env
from tests.support.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    """One process started in its own process group, its stdout+stderr in `log_path`."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], log_path: Path) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in close()
        self.popen = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def send_signal(self, signum: int) -> None:
        """Send `signum` to the main process only (Dramatiq's main forwards it to children)."""
        if self.alive():
            os.kill(self.pid, signum)

    def kill_group(self, signum: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signum)

    def wait(self, timeout: float) -> int:
        """Its exit code; a process still running after `timeout` fails the test with where
        each of its threads is (py-spy) and the end of its log."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.popen.args} still running {timeout} s later; its threads:\n"
                f"{self.stacks()}\nits log:\n{self.log()[-3000:]}"
            ) from None

    def stacks(self) -> str:
        """Where each thread of the process is (py-spy dump), or why that is unknown."""
        spy = Path(sys.executable).with_name("py-spy")
        if not spy.exists():
            return "(py-spy is not installed)"
        done = subprocess.run(
            [str(spy), "dump", "--pid", str(self.pid)], capture_output=True, text=True, timeout=30
        )
        return (done.stdout or done.stderr)[-6000:]

    def close(self) -> None:
        """SIGKILL the whole group: a test's processes owe nothing to anyone once it is over
        (the next test starts on a clean database and broker namespace)."""
        self.kill_group(signal.SIGKILL)
        if self.alive():
            self.popen.wait(5)
        self._log.close()


class WorkerProcess(Proc):
    """`dramatiq tests.support.worker_app` (queue `testq`), JSON logs in `log_path`."""

    def json_lines(self) -> Iterator[dict[str, Any]]:
        for line in self.log().splitlines():
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except ValueError:
                    continue

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.json_lines() if e.get("event") == name]

    def wait_ready(self, timeout: float = 30.0) -> WorkerProcess:
        def ready() -> bool:
            if not self.alive():
                raise AssertionError(
                    f"worker exited ({self.popen.returncode}):\n{self.log()[-3000:]}"
                )
            return bool(self.events("worker.ready"))

        wait_for(ready, timeout=timeout, what=f"worker {self.pid} ready")
        return self

    def children(self) -> list[int]:
        """PIDs of the Dramatiq worker processes forked by this main process."""
        path = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except OSError:
            return []


class RedisServer(Proc):
    """A private redis-server (AOF on, fsync always) that a test may stop and start again."""

    def __init__(self, directory: Path, log_path: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        argv = [
            "redis-server",
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--dir", str(directory),
        ]  # fmt: skip
        super().__init__(argv, env=os.environ, log_path=log_path)
        wait_for(self.ping, timeout=10, what=f"redis-server on {self.port}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM (Redis flushes its AOF and exits) and wait until the port is closed."""
        self.send_signal(signal.SIGTERM)
        self.wait(10)


class Procs:
    """Starts processes for one test and stops every one of them at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.marks = tmp / "marks.txt"
        self.marks.touch()
        self.started: list[Proc] = []

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {
            **os.environ,
            **test_env(),
            "dramatiq_worker_timeout": "50",
            "JOBFLEET_TEST_MARKS": str(self.marks),
            "PYTHONUNBUFFERED": "1",
            **(extra or {}),
        }

    def worker(
        self,
        *,
        threads: int = 4,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        name: str | None = None,
        ready: bool = True,
    ) -> WorkerProcess:
        name = name or f"worker{len(self.started)}"
        argv = [
            sys.executable, "-m", "dramatiq", "tests.support.worker_app",
            "--processes", "1", "--threads", str(threads), "--skip-logging", *args,
        ]  # fmt: skip
        proc = WorkerProcess(argv, env=self.env(env), log_path=self.tmp / f"{name}.log")
        self.started.append(proc)
        return proc.wait_ready() if ready else proc

    def redis(self, port: int | None = None, name: str = "redis") -> RedisServer:
        server = RedisServer(self.tmp / name, self.tmp / f"{name}-{len(self.started)}.log", port)
        self.started.append(server)
        return server

    def mark_lines(self) -> list[str]:
        return self.marks.read_text().splitlines()

    def close(self) -> None:
        for proc in reversed(self.started):
            proc.close()


@pytest.fixture
def procs(runtime: Runtime, tmp_path: Path) -> Iterator[Procs]:
    """Worker processes (and private servers) of one test, all stopped at its end (a conftest
    imports it: tests/integration, tests/scheduler)."""
    started = Procs(tmp_path)
    try:
        yield started
    finally:
        started.close()


def wait_exit(proc: Proc, timeout: float) -> tuple[int, float]:
    """Wait for `proc` to exit; returns (exit code, seconds waited)."""
    t0 = time.monotonic()
    code = proc.wait(timeout)
    return code, time.monotonic() - t0


class ProcessGroup:
    """Processes of one kind a test starts (each in its own session, logs kept for inspection);
    `stop_all` ends them by process group, SIGKILL after 15 s."""

    def __init__(self, tmp: Path, env: Mapping[str, str], *, name: str) -> None:
        self.tmp = tmp
        self.env = dict(env)
        self.name = name
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def spawn(self, argv: Sequence[str], **extra_env: str) -> subprocess.Popen[bytes]:
        log = self.tmp / f"{self.name}-{len(self.procs)}.log"
        proc = subprocess.Popen(
            list(argv),
            cwd=Path(__file__).resolve().parents[2],
            env={**os.environ, **self.env, **extra_env},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append((proc, log))
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(log.read_text(errors="replace") for _, log in self.procs if log.exists())

    def stop_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
