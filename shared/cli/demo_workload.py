"""The demo's work for the email, AI, export and doc workers (`fleet demo`).

Each scenario does what the product API would: it writes the domain rows a job needs (plain SQL,
since the kernel imports no worker), then sends the job through `shared.jobs.catalog` or stages
it through `shared.outbox` in the same transaction. The doc scenario is in `demo_documents.py`. A scenario answers `pending()` until its
domain result exists, and `results()` says where to look at it.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb
from sqlalchemy import text

from shared import outbox
from shared.contracts import SYSTEM_ORG
from shared.contracts.export import ExportBuildV1, ExportParams
from shared.jobs import catalog
from shared.runtime import Runtime

from .scenario import Scenario, now


class Emails(Scenario):
    """A two-step welcome sequence and a transactional sign-in code."""

    def __init__(self, org: UUID, *, step_delay_s: int = 2) -> None:
        super().__init__("email")
        self.org, self.step_delay_s = org, step_delay_s
        self.sequence: UUID | None = None
        self._last_trigger = 0.0

    def start(self, rt: Runtime) -> None:
        steps = [
            {"template_key": "welcome", "delay_s": 0},
            {"template_key": "support-reply", "delay_s": self.step_delay_s},
        ]
        variables = {
            "NAME": "Ada",
            "MESSAGE": "How is your first week going? Tell us what you would like to see next.",
            "TICKET_REF": "WELCOME-1",
        }
        with rt.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "INSERT INTO email_sequences (org_id, name, recipient_email, recipient_name, lang,"
                " variables, steps) VALUES (%s, 'welcome', 'ada@example.com', 'Ada', 'en', %s, %s)"
                " RETURNING id",
                (self.org, Jsonb(variables), Jsonb(steps)),
            ).fetchone()
            assert row is not None
            self.sequence = row[0]
            conn.execute(
                "INSERT INTO scheduled_emails (org_id, template_key, lang, recipient_email,"
                " recipient_name, variables, send_at, sequence_id, sequence_step)"
                " VALUES (%s, 'welcome', 'en', 'ada@example.com', 'Ada', %s, now(), %s, 0)",
                (self.org, Jsonb(variables), self.sequence),
            )
        catalog.EMAIL_SEND.send(
            {
                "org_id": self.org,
                "entity_id": uuid.uuid4(),
                "template_key": "otp-code",
                "recipient_email": "grace@example.com",
                "variables": {"CODE": "493 817", "EXPIRES_MINUTES": 10},
            }
        )
        self.tick(rt)

    def tick(self, rt: Runtime) -> None:
        # The scheduler sends `email-seq:run_due` once a minute; the demo does not wait for it.
        # A per-second slot keeps each trigger its own job (the scheduler's slot is the minute).
        at = now()
        if at.timestamp() - self._last_trigger >= 1.0:
            self._last_trigger = at.timestamp()
            slot = at.strftime("%Y-%m-%dT%H:%M:%SZ")
            catalog.EMAIL_SEQ_RUN_DUE.send({"org_id": SYSTEM_ORG, "slot": slot})

    def pending(self, rt: Runtime) -> bool:
        with rt.pool.connection() as conn:
            row = conn.execute(
                "SELECT status FROM email_sequences WHERE id = %s", (self.sequence,)
            ).fetchone()
        return row is None or row[0] == "ACTIVE"

    def results(self, rt: Runtime) -> list[str]:
        var = rt.settings.var_dir
        return [
            "mail: `fleet email inbox` (the dev sink keeps each message as "
            f"{var}/mail/*.eml) — 2 welcome-sequence steps to ada@, 1 sign-in code to grace@"
        ]


def chat_api_answers(base_url: str, timeout: float = 2.0) -> bool:
    """Whether an HTTP server answers at `base_url` (any status: /models may need the key)."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


ARTICLE = (
    "The outbox pattern writes an event in the same database transaction as the business "
    "change it announces. A relay publishes committed events to the message broker and marks "
    "them published; a crash between the two leaves the event pending, so it is published "
    "later, never lost, and never published for a rolled-back change."
)


class Ai(Scenario):
    """Embeddings on the bundled local model; a summary when a chat API answers."""

    def __init__(self, org: UUID) -> None:
        super().__init__("ai")
        self.org = org
        self.tasks: dict[str, UUID] = {}

    def start(self, rt: Runtime) -> None:
        sentences = [
            "Invoices are due thirty days after issue.",
            "Payment is expected within a month of the invoice date.",
            "The lottery draws a winner when the round ends.",
        ]
        self._send("embed", sentences, {})
        if chat_api_answers(rt.settings.ai_base_url):
            self._send("summarize", ARTICLE, {"max_words": 40})
        else:
            self.notes.append(
                f"AI summary skipped: no chat API answers at AI_BASE_URL={rt.settings.ai_base_url} "
                "(run Ollama there, or set AI_BASE_URL / AI_API_KEY / AI_MODEL)"
            )

    def _send(self, task: str, data: str | list[str], params: dict[str, Any]) -> None:
        task_id = uuid.uuid4()
        self.tasks[task] = task_id
        payload = {"org_id": self.org, "entity_id": task_id, "task": task, "input": data}
        catalog.AI_RUN.send({**payload, "params": params})

    def results(self, rt: Runtime) -> list[str]:
        with rt.pool.connection() as conn:
            rows = conn.execute(
                "SELECT task, status FROM ai_tasks WHERE id = ANY(%s)", (list(self.tasks.values()),)
            ).fetchall()
        lines = [f"AI task {t}: {s} (table ai_tasks; `fleet ai --help`)" for t, s in rows]
        return lines + self.notes


class Export(Scenario):
    """An ACCOUNTING export of `rows` ledger entries (seeded for the demo org), as CSV."""

    def __init__(self, org: UUID, rows: int) -> None:
        super().__init__("export")
        self.org, self.rows = org, rows
        self.export_id = uuid.uuid4()

    def start(self, rt: Runtime) -> None:
        params = ExportParams(format="CSV")
        payload = ExportBuildV1(
            org_id=self.org, entity_id=self.export_id, requested_by=self.org,
            type="ACCOUNTING", params=params,
        )  # fmt: skip
        with rt.sessions() as session, session.begin():
            # Example ledger rows (the export's source table is seeded by dev tooling only).
            session.execute(
                text(
                    "INSERT INTO ledger_entries (org_id, entry_date, journal, account, label,"
                    " debit, credit, reference)"
                    " SELECT :org, DATE '2024-01-01' + (i % 366), CASE WHEN i % 3 = 0 THEN 'BANK'"
                    " ELSE 'SALES' END, '70' || lpad((i % 97)::text, 4, '0'),"
                    " 'Demo entry ' || i, round((i % 1000) * 1.37, 2), 0, 'DEMO-' || i"
                    " FROM generate_series(1, :n) AS i"
                ),
                {"org": self.org, "n": self.rows},
            )
            session.execute(
                text(
                    "INSERT INTO exports (id, org_id, requested_by, type, params)"
                    " VALUES (:id, :org, :by, 'ACCOUNTING', CAST(:params AS jsonb))"
                ),
                {"id": self.export_id, "org": self.org, "by": self.org,
                 "params": params.model_dump_json()},
            )  # fmt: skip
            outbox.enqueue(session, catalog.EXPORT_BUILD, payload)

    def results(self, rt: Runtime) -> list[str]:
        with rt.pool.connection() as conn:
            row = conn.execute(
                "SELECT e.status, e.row_count, f.bucket, f.key FROM exports e"
                " LEFT JOIN file_objects f ON f.id = e.file_object_id WHERE e.id = %s",
                (self.export_id,),
            ).fetchone()
        status, count, bucket, key = row or (None, None, None, None)
        where = f"{bucket}/{key}" if key else "no file yet"
        return [
            f"export {self.export_id}: {status}, {count} rows, stored at {where}; "
            f"a download link: `fleet export url {self.export_id} --org {self.org}`"
        ]
