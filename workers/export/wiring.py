"""The composition root of the export domain: the collaborators `build_export` takes, built
once per process on first use (never at import time); tests install their own with
`set_exporter`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shared.runtime import Runtime, get_runtime
from shared.storage import StorageBackend, build_storage

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from shared.config import Settings


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Exporter:
    settings: Settings
    pool: ConnectionPool
    storage: StorageBackend
    clock: Callable[[], datetime] = utcnow


def build_exporter(runtime: Runtime, **overrides: Any) -> Exporter:
    parts: dict[str, Any] = {"settings": runtime.settings, "pool": runtime.pool}
    parts.update(overrides)
    if "storage" not in parts:
        parts["storage"] = build_storage(parts["settings"])
    return Exporter(**parts)


_lock = threading.Lock()
_exporter: Exporter | None = None


def get_exporter() -> Exporter:
    global _exporter
    if _exporter is None:
        with _lock:
            if _exporter is None:
                _exporter = build_exporter(get_runtime())
    return _exporter


def set_exporter(exporter: Exporter | None) -> Exporter | None:
    global _exporter
    with _lock:
        previous, _exporter = _exporter, exporter
    return previous
