"""Build the configured storage backend (a process's composition root calls this once)."""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from .backend import StorageBackend


def local_root(settings: Settings) -> Path:
    return Path(settings.storage_local_root or Path(settings.var_dir) / "storage")


def build_storage(settings: Settings) -> StorageBackend:
    """`STORAGE_BACKEND=local` (default, under `var/storage/`) or `s3` (boto3, lazily imported)."""
    if settings.storage_backend == "s3":
        from .backends.s3 import S3Backend

        return S3Backend.from_settings(settings)
    from .backends.local import LocalBackend

    key = settings.storage_signing_key
    return LocalBackend(
        local_root(settings),
        settings.storage_bucket,
        signing_key=key.get_secret_value().encode() if key else None,
        link_base_url=settings.storage_link_base_url,
    )
