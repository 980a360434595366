from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll `probe` until it returns a truthy value; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(interval)


def wait_run(job_id: str, status: str, *, org_id: object = None, timeout: float = 10.0) -> Any:
    """Wait until the run of `job_id` has `status`; returns its `RunView`."""
    from shared.jobs import runs

    def probe() -> Any:
        run = runs.find(job_id, org_id=org_id)  # type: ignore[arg-type]
        return run if run is not None and run.status == status else None

    return wait_for(probe, timeout=timeout, what=f"{job_id} {status}")
