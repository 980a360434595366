"""The export types shipped with the worker (DESIGN §4 tables and the example ledger).

LOTTERY_TICKETS and LOTTERY_WINNERS read the indexer's projections (issue 5). Their tables are
created by the scheduler's migration; until then these exports fail permanently with
"table ... does not exist yet". Expected columns (each row also has `org_id`, the nil UUID for
the system lottery):
  lottery_tickets(round_id, player, ticket_count, amount_wei, tx_hash, log_index, block_number, block_time)
  lottery_winners(round_id, winner, prize_wei, tx_hash, log_index, block_number, block_time)
"""

from __future__ import annotations

from shared.jobs.statuses import RUN_STATUSES

from .registry import Column, ExportType, Filter, register

EMAIL_STATUSES = ("SCHEDULED", "QUEUED", "SENDING", "SENT", "FAILED", "UNCONFIRMED", "CANCELED")

JOB_RUNS = register(
    ExportType(
        name="JOB_RUNS",
        title="Job runs (audit)",
        source="job_runs",
        table="job_runs",
        columns=(
            Column("job_id", "job_id", width=3.0),
            Column("job_name", "job_name", width=1.4),
            Column("queue", "queue", width=0.8),
            Column("status", "status", width=1.0),
            Column("attempt", "attempt", "int", width=0.6),
            Column("error_code", "error_code", width=1.2),
            Column("error", "error", width=2.0),
            Column("request_id", "request_id", width=1.2),
            Column("queued_at", "queued_at", "datetime", width=1.6),
            Column("started_at", "started_at", "datetime", width=1.6),
            Column("finished_at", "finished_at", "datetime", width=1.6),
        ),
        order_by="queued_at, id",
        date_sql="queued_at",
        own_job_sql="job_id",
        filters={
            "status": Filter("status", choices=RUN_STATUSES),
            "job_name": Filter("job_name"),
            "queue": Filter("queue"),
        },
    )
)

EMAILS = register(
    ExportType(
        name="EMAILS",
        title="Sent-email log",
        source="scheduled_emails",
        table="scheduled_emails",
        columns=(
            Column("id", "id::text", width=2.4),
            Column("template_key", "template_key", width=1.4),
            Column("lang", "lang", width=0.5),
            Column("recipient_email", "recipient_email", width=2.2),
            Column("status", "status", width=1.0),
            Column("send_at", "send_at", "datetime", width=1.6),
            Column("sent_at", "sent_at", "datetime", width=1.6),
            Column("message_id", "message_id", width=2.4),
            Column("attempts", "attempts", "int", width=0.6),
            Column("error_code", "error_code", width=1.2),
        ),
        order_by="send_at, id",
        date_sql="send_at",
        filters={
            "status": Filter("status", choices=EMAIL_STATUSES),
            "template_key": Filter("template_key"),
            "recipient_email": Filter("lower(recipient_email)", casefold=True),
        },
    )
)

LOTTERY_TICKETS = register(
    ExportType(
        name="LOTTERY_TICKETS",
        title="Lottery tickets",
        source="lottery_tickets",
        table="lottery_tickets",
        columns=(
            Column("round_id", "round_id", "int", width=0.7),
            Column("player", "player", width=2.6),
            Column("ticket_count", "ticket_count", "int", width=0.8, total=True),
            Column("amount_wei", "amount_wei::text", width=1.8),
            Column("tx_hash", "tx_hash", width=4.0),
            Column("log_index", "log_index", "int", width=0.6),
            Column("block_number", "block_number", "int", width=0.9),
            Column("block_time", "block_time", "datetime", width=1.6),
        ),
        order_by="block_number, log_index",
        date_sql="block_time",
        filters={
            "round_id": Filter("round_id", "int"),
            "player": Filter("lower(player)", casefold=True),
        },
    )
)

LOTTERY_WINNERS = register(
    ExportType(
        name="LOTTERY_WINNERS",
        title="Lottery winners",
        source="lottery_winners",
        table="lottery_winners",
        columns=(
            Column("round_id", "round_id", "int", width=0.7),
            Column("winner", "winner", width=2.6),
            Column("prize_wei", "prize_wei::text", width=1.8),
            Column("tx_hash", "tx_hash", width=4.0),
            Column("log_index", "log_index", "int", width=0.6),
            Column("block_number", "block_number", "int", width=0.9),
            Column("block_time", "block_time", "datetime", width=1.6),
        ),
        order_by="block_number, log_index",
        date_sql="block_time",
        filters={
            "round_id": Filter("round_id", "int"),
            "winner": Filter("lower(winner)", casefold=True),
        },
    )
)

ACCOUNTING = register(
    ExportType(
        name="ACCOUNTING",
        title="Accounting ledger",
        source="ledger_entries",
        table="ledger_entries",
        columns=(
            Column("entry_date", "entry_date", "date", width=1.0),
            Column("journal", "journal", width=0.7),
            Column("account", "account", width=0.9),
            Column("label", "label", width=3.0),
            Column("debit", "debit", "decimal", width=1.0, total=True),
            Column("credit", "credit", "decimal", width=1.0, total=True),
            Column("currency", "currency", width=0.6),
            Column("reference", "reference", width=1.2),
        ),
        order_by="entry_date, id",
        date_sql="entry_date",
        filters={
            "journal": Filter("journal"),
            "account": Filter("account"),
            "currency": Filter("currency"),
        },
    )
)
