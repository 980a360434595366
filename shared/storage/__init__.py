"""The storage port: artefacts in a local directory or an S3-compatible bucket.

storage = build_storage(settings)
with storage.open_writer(object_key(org_id, "exports", export_id, "x.csv"), "text/csv") as w:
    w.write(b"...")
    stored = w.commit()          # nothing is visible at the key before this; a FileObject
storage.signed_url(stored.key, expires_in=900)
"""

from __future__ import annotations

from .backend import (
    InvalidKey,
    InvalidLink,
    LinkExpired,
    ObjectNotFound,
    ObjectWriter,
    StorageBackend,
    StorageError,
    check_key,
    object_key,
    within,
)
from .factory import build_storage, local_root

__all__ = [
    "InvalidKey",
    "InvalidLink",
    "LinkExpired",
    "ObjectNotFound",
    "ObjectWriter",
    "StorageBackend",
    "StorageError",
    "build_storage",
    "check_key",
    "local_root",
    "object_key",
    "within",
]
