"""The export domain's alembic revisions (`exports` and the example `ledger_entries` of the
ACCOUNTING export), branching off the kernel's first.

Named by the registration (`Domain.migrations`); `fleet db upgrade` applies them with the
kernel's and every other domain's (shared/db/migrate.py).
"""
