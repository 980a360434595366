"""The fleet launcher behind `make run` / `fleet run`.

- `embedded/`: Redis and Postgres from the environment when they answer, else embedded ones.
- `plan.py`: the declarative table of processes (the five workers and the scheduler); the
  Makefile's `run-worker-*` targets execute the same command lines.
- `supervisor.py`: starts the table, restarts a crashed process with back-off, stops all on
  SIGINT/SIGTERM. `app.py` (`launch`) wires the three together.
"""

from __future__ import annotations

from ..errors import FleetError


class LaunchError(FleetError):
    """The fleet could not be launched."""

    code = "LAUNCH_FAILED"


__all__ = ["LaunchError"]
