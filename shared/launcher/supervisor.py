"""Runs the processes of a plan, restarts the ones that die, stops them all on request.

A child that exits while the fleet is running is restarted after a back-off that doubles with
each quick failure (1 s, 2 s, 4 s ... capped at 30 s; a child that ran for a minute starts over at
1 s). Dramatiq's main process exits when one of its worker processes is killed (DESIGN §3), so
restarting the main process is what brings a SIGKILLed worker back.

A child that dies leaves its process group behind it (a Dramatiq main SIGKILLed leaves its worker
process): the group gets SIGTERM at once (each worker process also gets it from its parent-death
signal, `shared/middleware/process_services.py`), SIGKILL once the grace period has passed, and
the child is restarted only when its group is gone, so a restart never finds its own health port
held by its predecessor's orphan.

Stopping: SIGTERM to each process (Dramatiq forwards it to its workers, which finish in-flight
jobs within `--worker-shutdown-timeout` and hand back the rest), a wait of the grace period plus
a margin, then SIGKILL to the process group of any straggler.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .metrics_dir import prune_dead
from .plan import ProcessSpec
from .spawn import spawn

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
STABLE_AFTER_S = 60.0
STOP_MARGIN_S = 5.0


def backoff(failures: int) -> float:
    """Delay before restart number `failures` (1-based) of a child that keeps failing."""
    return float(min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, failures - 1)))


@dataclass
class Child:
    spec: ProcessSpec
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    failures: int = 0
    restart_at: float | None = None
    last_exit: int | None = None
    #: The dead child's process group gets SIGKILL at this time if anything of it is left.
    reap_at: float | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Supervisor:
    def __init__(
        self,
        specs: Sequence[ProcessSpec],
        *,
        env: Mapping[str, str],
        log_dir: Path,
        grace_s: float,
        state_file: Path | None = None,
        metrics_dir: Path | None = None,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.children = [Child(spec, log_dir / f"{spec.name}.log") for spec in specs]
        self.env = dict(env)
        self.grace_s = grace_s
        self.state_file = state_file
        self.metrics_dir = metrics_dir
        self.say = say
        self.clock = clock

    # -- running -------------------------------------------------------------------------------

    def start_all(self) -> None:
        for child in self.children:
            self._start(child)
        self._write_state()

    def _start(self, child: Child) -> None:
        child.log_path.parent.mkdir(parents=True, exist_ok=True)
        child.proc = spawn(
            child.spec.argv, env={**self.env, **child.spec.env}, log_path=child.log_path
        )
        child.started_at = self.clock()
        child.restart_at = None

    def check(self) -> None:
        """One pass: notice exits, schedule restarts, start the children that are due."""
        now = self.clock()
        changed = False
        for child in self.children:
            if (
                child.restart_at is None
                and child.proc is not None
                and (code := child.proc.poll()) is not None
            ):
                ran = now - child.started_at
                child.last_exit = code
                child.failures = 1 if ran >= STABLE_AFTER_S else child.failures + 1
                delay = backoff(child.failures)
                child.restart_at = now + delay
                _signal_group(child.proc.pid, signal.SIGTERM)  # orphans of a killed main process
                child.reap_at = now + self.grace_s
                if self.metrics_dir is not None:
                    prune_dead(self.metrics_dir)
                self.say(
                    f"{child.spec.name} (pid {child.proc.pid}) exited with code {code} after {ran:.1f}s; "
                    f"restart #{child.restarts + 1} in {delay:.0f}s (log: {child.log_path})"
                )
            if child.reap_at is not None and child.proc is not None:
                if not _group_alive(child.proc.pid):
                    child.reap_at = None
                elif now >= child.reap_at:
                    self.say(
                        f"{child.spec.name}: processes of its group (pgid {child.proc.pid}) still "
                        f"alive {self.grace_s:.0f}s after SIGTERM: SIGKILL"
                    )
                    _signal_group(child.proc.pid, signal.SIGKILL)
                    child.reap_at = now + 1.0  # looked at again until the group is gone
            if (
                child.restart_at is not None
                and now >= child.restart_at
                and child.reap_at is None  # its predecessor's group is gone
            ):
                child.restarts += 1
                self._start(child)
                self.say(
                    f"{child.spec.name} restarted as pid {child.pid} (restarts: {child.restarts})"
                )
                changed = True
        if changed:
            self._write_state()

    def run(self, stop: threading.Event, *, interval_s: float = 0.2) -> None:
        while not stop.wait(interval_s):
            self.check()

    # -- stopping ------------------------------------------------------------------------------

    def stop_all(self, *, hurry: threading.Event | None = None) -> None:
        for child in self.children:
            child.restart_at = None
            if child.alive():
                assert child.proc is not None
                child.proc.send_signal(signal.SIGTERM)
        deadline = self.clock() + self.grace_s + STOP_MARGIN_S
        while any(c.alive() for c in self.children) and self.clock() < deadline:
            if hurry is not None and hurry.is_set():
                break
            time.sleep(0.05)
        for child in self.children:
            if child.proc is None:
                continue
            if child.alive():
                self.say(f"{child.spec.name} (pid {child.proc.pid}) did not stop in time: SIGKILL")
            _signal_group(child.proc.pid, signal.SIGKILL)
            child.proc.wait()
        if self.metrics_dir is not None:
            prune_dead(self.metrics_dir)
        self._write_state(stopped=True)

    # -- state for `fleet status` and tests ------------------------------------------------------

    def _write_state(self, *, stopped: bool = False) -> None:
        if self.state_file is None:
            return
        state = {
            "supervisor_pid": os.getpid(),
            "stopped": stopped,
            "processes": [
                {
                    "name": c.spec.name,
                    "pid": c.pid,
                    "restarts": c.restarts,
                    "last_exit": c.last_exit,
                    "health_url": c.spec.health_url,
                    "log": str(c.log_path),
                }
                for c in self.children
            ],
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_file)


def _group_alive(pgid: int) -> bool:
    """Whether a live process of group `pgid` is left. Zombies do not count: an orphan's is
    reaped by PID 1, which in a container may never do it."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    # Each child leads its own session, so its pid is its process group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
