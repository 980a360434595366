"""The composition root of the export domain: the collaborators `build_export` takes, built
once per process on first use (never at import time); tests install their own with
`set_exporter`.

`Exporter.settings` are the domain's (`ExportSettings`, `EXPORT_*`); the storage backend and the
lifetime of download links come from the kernel's storage port (`STORAGE_*`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shared.runtime import Runtime, get_runtime
from shared.storage import StorageBackend, build_storage

from .settings import ExportSettings, export_settings

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Exporter:
    settings: ExportSettings
    pool: ConnectionPool
    storage: StorageBackend
    #: Default lifetime of a download link (STORAGE_URL_TTL_S).
    url_ttl_s: int
    clock: Callable[[], datetime] = utcnow


def build_exporter(runtime: Runtime, **overrides: Any) -> Exporter:
    """The domain's collaborators on `runtime` (its pool; storage and link lifetime from its
    settings); `settings` default to the process's `ExportSettings`."""
    parts: dict[str, Any] = {
        "settings": export_settings(),
        "pool": runtime.pool,
        "url_ttl_s": runtime.settings.storage_url_ttl_s,
    }
    parts.update(overrides)
    if "storage" not in parts:
        parts["storage"] = build_storage(runtime.settings)
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
