"""The ai domain's alembic revisions (`ai_tasks`, `ai_usage`), branching off the kernel's first.

Named by the registration (`Domain.migrations`); `fleet db upgrade` applies them with the
kernel's and every other domain's (shared/db/migrate.py).
"""
