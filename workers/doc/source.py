"""The uploaded file behind a document: its `file_objects` row and its bytes, through the
storage port (`shared.storage`); and the upload path producers (CLI, tests, bench) use.

`FileCache` keeps recently read files in memory: every page job of a document reads the same
file, and the threads of one worker process share it instead of fetching it once per page.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row

from shared.db.models import FileObject
from shared.errors import PermanentError
from shared.storage import ObjectNotFound, StorageBackend, object_key


def load_file_row(
    conn: psycopg.Connection[Any], file_object_id: UUID, org_id: UUID
) -> FileObject | None:
    """The `file_objects` row, scoped by org (another org's id reads as missing)."""
    with conn.cursor(row_factory=class_row(FileObject)) as cur:
        cur.execute(
            "SELECT id, org_id, provider, bucket, key, content_type, size_bytes, sha256 "
            "FROM file_objects WHERE id = %s AND org_id = %s",
            (file_object_id, org_id),
        )
        return cur.fetchone()


def read_bytes(storage: StorageBackend, row: FileObject) -> bytes:
    """The file's bytes, checked against the row (size and SHA-256)."""
    if row.provider != storage.provider or (row.bucket or storage.bucket) != storage.bucket:
        raise PermanentError(
            f"file {row.id} is in {row.provider}:{row.bucket}, this worker reads "
            f"{storage.provider}:{storage.bucket}",
            code="STORAGE_MISMATCH",
        )
    try:
        data = storage.read(row.key)
    except ObjectNotFound:
        raise PermanentError(f"file {row.id}: no object at its key", code="FILE_MISSING") from None
    if len(data) != row.size_bytes or hashlib.sha256(data).hexdigest() != row.sha256:
        raise PermanentError(
            f"file {row.id}: stored bytes do not match the recorded size/sha256",
            code="CHECKSUM_MISMATCH",
        )
    return data


class FileCache:
    """A small LRU of file bytes keyed by (file id, sha256), bounded in total bytes."""

    def __init__(self, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[UUID, str], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, storage: StorageBackend, row: FileObject) -> bytes:
        key = (row.id, row.sha256)
        with self._lock:
            data = self._items.get(key)
            if data is not None:
                self._items.move_to_end(key)
                return data
        data = read_bytes(storage, row)
        with self._lock:
            if key not in self._items and len(data) <= self.max_bytes:
                self._items[key] = data
                self._size += len(data)
                while self._size > self.max_bytes:
                    _, old = self._items.popitem(last=False)
                    self._size -= len(old)
        return data


@dataclass(frozen=True)
class Upload:
    document_id: UUID
    file_object_id: UUID


def upload(
    conn: psycopg.Connection[Any],
    storage: StorageBackend,
    org_id: UUID,
    data: bytes,
    *,
    filename: str = "document.pdf",
    schema_name: str = "auto",
    document_id: UUID | None = None,
) -> Upload:
    """Store `data`, record its `file_objects` row and an UPLOADED `documents` row (the
    product API's side of an upload); the caller then sends `doc:ingest`."""
    document_id = document_id or uuid.uuid4()
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in filename).lstrip("._") or "file"
    stored = storage.put(
        object_key(org_id, "documents", document_id, safe[:120]), data, "application/pdf"
    )
    file_id = stored.id
    with conn.transaction():
        conn.execute(
            "INSERT INTO file_objects (id, org_id, provider, bucket, key, content_type, size_bytes, sha256) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (file_id, org_id, stored.provider, stored.bucket, stored.key,
             stored.content_type, stored.size_bytes, stored.sha256),
        )  # fmt: skip
        conn.execute(
            "INSERT INTO documents (id, org_id, file_object_id, filename, schema_name) "
            "VALUES (%s, %s, %s, %s, %s)",
            (document_id, org_id, file_id, filename, schema_name),
        )
    return Upload(document_id=document_id, file_object_id=file_id)
