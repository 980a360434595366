"""The export step of `fleet demo` (registered as `workers.export.demo:scenario`): an ACCOUNTING
export of example ledger rows, as CSV, requested through the domain's client as a product would
(the `exports` row and its `export:build` job through the outbox, in one transaction)."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import text

from shared.cli.scenario import Scenario
from shared.runtime import Runtime
from workers.export.contracts import ExportParams

from . import store
from .client import request_export

#: `n` example ledger rows of one org over 2024 (the ACCOUNTING export's source table is seeded
#: by dev tooling only).
SEED_LEDGER = text(
    "INSERT INTO ledger_entries (org_id, entry_date, journal, account, label,"
    " debit, credit, reference)"
    " SELECT :org, DATE '2024-01-01' + (i % 366), CASE WHEN i % 3 = 0 THEN 'BANK'"
    " ELSE 'SALES' END, '70' || lpad((i % 97)::text, 4, '0'),"
    " 'Demo entry ' || i, round((i % 1000) * 1.37, 2), 0, 'DEMO-' || i"
    " FROM generate_series(1, :n) AS i"
)


class ExportScenario(Scenario):
    """An ACCOUNTING export of `rows` ledger entries (seeded for the demo org), as CSV."""

    def __init__(self, org: UUID, rows: int) -> None:
        super().__init__("export")
        self.org, self.rows = org, rows
        self.export_id: UUID | None = None

    def start(self, rt: Runtime) -> None:
        with rt.sessions() as session, session.begin():
            session.execute(SEED_LEDGER, {"org": self.org, "n": self.rows})
            request = request_export(
                session,
                org_id=self.org,
                requested_by=self.org,
                type="ACCOUNTING",
                params=ExportParams(format="CSV"),
            )
        self.export_id = request.export_id

    def results(self, rt: Runtime) -> list[str]:
        if self.export_id is None:
            return self.notes
        with rt.pool.connection() as conn:
            row = store.get(conn, self.export_id, self.org)
            fo = None
            if row is not None and row.file_object_id is not None:
                fo = store.file_object(conn, row.file_object_id, self.org)
        status, count = (row.status, row.row_count) if row else (None, None)
        where = f"{fo.bucket}/{fo.key}" if fo else "no file yet"
        return [
            f"export {self.export_id}: {status}, {count} rows, stored at {where}; "
            f"a download link: `fleet export url {self.export_id} --org {self.org}`"
        ]


def scenario(org: UUID, *, small: bool) -> Scenario:
    """50,000 rows; 2,000 in a `--small` run."""
    return ExportScenario(org, rows=2_000 if small else 50_000)
