"""The doc domain's Alembic revisions (registered as `Domain.migrations`): documents, their
pages and per-language full-text columns (0006). They branch off the kernel's first revision
(`0001`).
"""
