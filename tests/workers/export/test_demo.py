"""The export step of `fleet demo`: its ledger rows seeded and its export requested through the
client (the outbox), built by the worker, and where to find it said in its results."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from shared.outbox import relay_once
from tests.support.wait import wait_for
from tests.workers.export.conftest import ExportWorker
from workers.export.demo import ExportScenario, scenario


@pytest.mark.slow
def test_the_demo_exports_its_seeded_ledger_as_csv(
    export_worker: ExportWorker, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    step = scenario(org, small=True)
    assert isinstance(step, ExportScenario) and step.rows == 2_000

    step.start(export_worker.runtime)
    relay_once(export_worker.runtime, now=datetime.now(UTC))

    def completed() -> bool:
        row = db.execute("SELECT status FROM exports WHERE id = %s", (step.export_id,)).fetchone()
        return row is not None and row[0] == "COMPLETED"

    wait_for(completed, timeout=30, what="the demo's export COMPLETED")
    [line] = step.results(export_worker.runtime)
    key = f"orgs/{org}/exports/{step.export_id}/accounting.csv"
    assert line == (
        f"export {step.export_id}: COMPLETED, 2000 rows, stored at exports/{key}; "
        f"a download link: `fleet export url {step.export_id} --org {org}`"
    )
