"""Where the machine's CPU went while a system was measured, by group of processes.

On a 2-core machine the email worker, Postgres, Redis, Postfix and the benchmark's own client
share the cores: a rate is CPU-bound when the machine was busy all along, and the CPU
milliseconds per email of each group tell which part costs what. Read from /proc (Linux); the
CPU of a process that exits within the window is not counted (Postfix and Postgres keep
theirs alive across a measurement).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: Postfix's daemons (master and the services it spawns).
POSTFIX = {
    "master", "smtpd", "cleanup", "qmgr", "trivial-rewrite", "pickup", "anvil", "proxymap",
    "postlogd", "discard", "pipe", "local", "bounce", "tlsmgr", "smtp", "postgrey", "showq",
}  # fmt: skip


def _stat(pid: int) -> tuple[str, int, float] | None:
    """(comm, parent pid, CPU seconds of the process and its threads)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    return comm, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def _machine_busy_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the machine since boot, all cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])
    return (total - idle) / TICK, total / TICK


class CpuMeter:
    """`start()`, run the system, `stop(n)`: CPU ms per item by group and the machine's load.

    `groups` maps a group name to a predicate on (pid, comm, ancestors); the first that
    matches wins; `postgres`, `redis` and `postfix` are matched by process name after them,
    the meter's own process is `bench`, anything else `other` (other sessions' work)."""

    def __init__(self, groups: dict[str, Callable[[int, str, list[int]], bool]]) -> None:
        self.groups = groups
        self._before: dict[int, tuple[str, float]] = {}
        self._machine: tuple[float, float] = (0.0, 0.0)

    def _group(self, pid: int, comm: str, parents: dict[int, int]) -> str:
        chain: list[int] = []
        p = parents.get(pid, 0)
        while p > 1 and len(chain) < 32:
            chain.append(p)
            p = parents.get(p, 0)
        for name, match in self.groups.items():
            if match(pid, comm, chain):
                return name
        if pid == os.getpid():
            return "bench"
        if comm == "postgres":
            return "postgres"
        if comm.startswith("redis-server"):
            return "redis"
        if comm in POSTFIX:
            return "postfix"
        return "other"

    def _snapshot(self) -> dict[int, tuple[str, float]]:
        stats: dict[int, tuple[str, int, float]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (s := _stat(int(entry))) is not None:
                stats[int(entry)] = s
        parents = {pid: s[1] for pid, s in stats.items()}
        return {pid: (self._group(pid, s[0], parents), s[2]) for pid, s in stats.items()}

    def start(self) -> None:
        self._before = self._snapshot()
        self._machine = _machine_busy_s()

    def stop(self, items: int) -> dict[str, float]:
        """CPU ms per item of each group, plus `machine_busy` (fraction of all cores busy)."""
        after = self._snapshot()
        busy1, total1 = _machine_busy_s()
        used: dict[str, float] = {}
        for pid, (group, cpu) in after.items():
            before = self._before.get(pid)
            used[group] = used.get(group, 0.0) + cpu - (before[1] if before else 0.0)
        out = {g: round(s * 1000 / items, 3) for g, s in sorted(used.items())}
        out["machine_busy"] = round(
            (busy1 - self._machine[0]) / max(total1 - self._machine[1], 1e-9), 3
        )
        return out
