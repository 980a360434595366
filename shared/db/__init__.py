"""Postgres: models, engine, migrations."""
