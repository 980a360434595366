"""The notes domain's alembic revisions (registration `migrations`)."""
