"""The fleet's `PROMETHEUS_MULTIPROC_DIR`: fresh at start, dead processes' live gauges pruned.

prometheus-client keeps one file per process; `liveall` gauges (such as `jobfleet_process_up`)
of a process that died must be removed or its last value is reported forever.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

_LIVE = re.compile(r"^gauge_live\w*_(\d+)\.db$")


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_dead(path: Path) -> list[int]:
    """Remove the live-gauge files of processes that no longer exist; returns their pids."""
    dead: list[int] = []
    for file in path.glob("gauge_live*.db"):
        match = _LIVE.match(file.name)
        if match and not _running(pid := int(match.group(1))):
            with contextlib.suppress(FileNotFoundError):
                file.unlink()
            dead.append(pid)
    return sorted(set(dead))
