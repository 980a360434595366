"""A worker's processes never outlive it, and a restart never finds its own port taken (issue 31).

Before: under `fleet run`, a worker main SIGKILLed during boot left its Dramatiq worker process
alive 40 s after the SIGTERM to its group (it was blocked on a lock, its SIGTERM handler
installed); the orphan kept the health port and the restarted worker logged `health port ...
is in use by another process`.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from shared.launcher.plan import ProcessSpec
from shared.launcher.supervisor import Supervisor
from shared.runtime import Runtime
from tests.support.procs import Procs, free_port
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_dramatiq_worker_process_stops_when_its_main_is_sigkilled(
    runtime: Runtime, procs: Procs
) -> None:
    port = free_port()
    worker = procs.worker(env={"HEALTH_PORT": str(port)})
    children = worker.children()
    assert len(children) == 1

    os.kill(worker.pid, signal.SIGKILL)  # nothing forwards SIGTERM now: the kernel must

    wait_for(lambda: not _alive(children[0]), timeout=15, what="the orphaned worker process gone")
    wait_for(lambda: _port_free(port), timeout=5, what="its health port free")


#: A main process whose child ignores SIGTERM and holds a port (as a worker process blocked on a
#: lock held its health port), and which says when it has bound the port itself.
STUBBORN = r"""
import os, signal, socket, sys, time
port = int(sys.argv[1])
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(1)
    print("child", os.getpid(), "bound", flush=True)
    while True:
        time.sleep(1)
time.sleep(300)
"""


def test_the_supervisor_kills_a_dead_childs_group_after_the_grace_and_restarts_it_after(
    tmp_path: Path,
) -> None:
    port = free_port()
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    said: list[str] = []
    supervisor = Supervisor(
        [ProcessSpec("stubborn", (sys.executable, str(script), str(port)), free_port(), {})],
        env=dict(os.environ),
        log_dir=tmp_path,
        grace_s=2.0,
        say=said.append,
    )
    supervisor.start_all()
    child = supervisor.children[0]
    log = child.log_path
    try:
        wait_for(lambda: "bound" in log.read_text(), what="the first orphan-to-be bound")
        orphan = int(log.read_text().split()[1])
        first_main = child.pid
        assert first_main is not None
        os.kill(first_main, signal.SIGKILL)
        killed_at = time.monotonic()

        def restarted() -> bool:
            supervisor.check()
            return child.restarts == 1

        wait_for(restarted, timeout=15, interval=0.1, what="the restart")
        # The orphan ignored SIGTERM: SIGKILLed once the grace passed, before the restart.
        assert not _alive(orphan)
        assert time.monotonic() - killed_at >= 2.0
        assert any("SIGKILL" in line for line in said), said

        def bound_again() -> bool:
            supervisor.check()
            return log.read_text().count("bound") == 2

        wait_for(bound_again, timeout=15, interval=0.1, what="the restarted child bound its port")
    finally:
        supervisor.stop_all()
    assert not _alive(orphan)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
