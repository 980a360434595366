"""`fleet demo`'s step for notes."""

from __future__ import annotations

from uuid import UUID

from shared.cli.scenario import Scenario
from shared.runtime import Runtime


class Notes(Scenario):
    def __init__(self, org: UUID) -> None:
        super().__init__("notes")
        self.org = org

    def start(self, rt: Runtime) -> None:
        from .client import index_note

        self.notes.append(
            f"notes:index sent as {index_note('a demo note', org_id=self.org).job_id}"
        )


def scenario(org: UUID, *, small: bool) -> Scenario:
    return Notes(org)
