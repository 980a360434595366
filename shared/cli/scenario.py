"""A scenario of `fleet demo`: the base class each domain's demo step subclasses.

A domain registers `workers.<domain>.demo:scenario` (a function `(org, *, small) -> Scenario`) in
its registration's `demo`; `fleet demo` (shared/cli/demo.py) runs every registered one. A
scenario writes the domain rows a job needs and sends it through the domain's `client` (as the
product API would), answers `pending()` until its result exists, and `results()` says where to
look at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.runtime import Runtime


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Scenario:
    """One piece of the workload. `skipped` says why it did not run (nothing to wait for)."""

    name: str
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)

    def start(self, rt: Runtime) -> None:
        raise NotImplementedError

    def tick(self, rt: Runtime) -> None:
        """Called every refresh while pending (e.g. to trigger the next due step)."""

    def pending(self, rt: Runtime) -> bool:
        return False

    def results(self, rt: Runtime) -> list[str]:
        return self.notes
