"""Asking each process for `/health/ready` and printing the table `make run` shows."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

from .supervisor import Child


def readiness(url: str, timeout: float = 1.0) -> str:
    """`ready`, `not ready (<failing checks>)` or `starting` (nothing listens yet)."""
    try:
        with urllib.request.urlopen(f"{url}/health/ready", timeout=timeout) as response:
            return "ready" if response.status == 200 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        try:
            checks = json.loads(exc.read() or b"{}").get("checks", {})
            failing = ", ".join(f"{k}: {v}" for k, v in checks.items() if v != "ok")
        except ValueError:
            failing = ""
        return f"not ready ({failing or exc.code})"
    except (OSError, ValueError):
        return "starting"


def state_of(child: Child) -> str:
    if not child.alive():
        return "restarting" if child.restart_at is not None else f"exited ({child.last_exit})"
    return readiness(child.spec.health_url)


def wait_ready(
    children: Sequence[Child],
    *,
    timeout: float,
    stop: threading.Event,
    tick: Callable[[], None] = lambda: None,
) -> dict[str, str]:
    """Poll until every child is ready, `timeout` passes or `stop` is set; returns the states.
    `tick` runs between polls (the supervisor's restart pass)."""
    deadline = time.monotonic() + timeout
    while True:
        tick()
        states = {c.spec.name: state_of(c) for c in children}
        if all(s == "ready" for s in states.values()) or time.monotonic() > deadline:
            return states
        if stop.wait(0.25):
            return states


def table(children: Sequence[Child], states: dict[str, str]) -> str:
    rows = [("process", "pid", "health", "state")]
    rows += [
        (
            c.spec.name,
            str(c.pid or "-"),
            f"{c.spec.health_url}/health/ready",
            states.get(c.spec.name, "?"),
        )
        for c in children
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(r))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in [*widths, 5]))
    return "\n".join(lines)
