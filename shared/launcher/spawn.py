"""Starting child processes that cannot outlive the launcher.

Every child gets its own session (a Ctrl-C in the terminal reaches only the launcher, which then
stops the children in order) and, on Linux, a parent-death signal: if the launcher itself is
killed with SIGKILL, its children are told to stop instead of running on as orphans.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

_PR_SET_PDEATHSIG = 1


def _death_signal(sig: int) -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    def set_pdeathsig() -> None:
        # Runs in the child after fork (and after any setuid, which would clear it).
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)

    return set_pdeathsig


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> None:
    """From now on this process gets `sig` when its parent (`parent_pid`) dies, on Linux; when
    it is dead already (it died while this process started), at once."""
    set_pdeathsig = _death_signal(sig)
    if set_pdeathsig is None:
        return
    set_pdeathsig()
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log_path: Path | None = None,
    cwd: Path | None = None,
    user: str | None = None,
    death_signal: int = signal.SIGTERM,
) -> subprocess.Popen[bytes]:
    """Start `argv` with stdout and stderr appended to `log_path` (or discarded)."""
    out: IO[Any] | int
    out = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_death_signal(death_signal),
            # As another user: its own primary group and no supplementary groups (root's group
            # would otherwise apply and deny access where "others" are allowed).
            user=user,
            group=_primary_group(user) if user else None,
            extra_groups=[] if user else None,
            close_fds=True,
        )
    finally:
        if not isinstance(out, int):
            out.close()


def _primary_group(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_gid


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
