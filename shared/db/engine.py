"""Engines and sessions, built by a process's composition root (never at import time)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker


def make_engine(
    url: str, *, pool_size: int = 5, connect_args: dict[str, Any] | None = None
) -> Engine:
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=10,
        pool_pre_ping=True,
        connect_args=connect_args or {},
    )


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
