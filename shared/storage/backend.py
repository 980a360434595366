"""The storage port: where artefacts (exports, uploaded documents) live.

A backend stores objects under keys. Keys are built by code (`object_key`), never taken raw from
input, and cannot leave their prefix: no absolute paths, no `..`, no empty or hidden parts.

Writing is streamed: `open_writer(key, content_type)` returns an `ObjectWriter` (a binary,
write-only file object) that hashes and counts what it is given; `commit()` makes the object
visible at its key in one step (rename, or a completed multipart upload) and returns what was
stored (a `FileObject`: its `file_objects` row, not yet saved); `abort()` (or leaving the `with`
block on an exception) discards everything, so a failed or canceled write never leaves a partial
object behind. `put(key, chunks)` is the short form.
"""

from __future__ import annotations

import hashlib
import io
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from ..errors import FleetError

if TYPE_CHECKING:
    from ..db.models import FileObject

# -- Errors ----------------------------------------------------------------------------------


class StorageError(FleetError):
    """The storage backend failed."""

    code = "STORAGE_ERROR"


class InvalidKey(StorageError):
    """The object key is not allowed (absolute, `..`, empty or hidden part, control character)."""

    code = "INVALID_KEY"


class ObjectNotFound(StorageError):
    """No object at that key."""

    code = "NOT_FOUND"


class InvalidLink(StorageError):
    """The signed link is malformed or its signature does not match."""

    code = "INVALID_LINK"


class LinkExpired(InvalidLink):
    """The signed link has expired."""

    code = "LINK_EXPIRED"


# -- Keys ------------------------------------------------------------------------------------

_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,199}$")


def check_key(key: str) -> str:
    """Return `key` when every `/`-separated part is a plain name; raise `InvalidKey` otherwise."""
    if not key or len(key) > 1024 or key.startswith("/") or key.endswith("/"):
        raise InvalidKey(f"invalid object key {key!r}")
    for part in key.split("/"):
        if not _PART.match(part) or part in (".", ".."):
            raise InvalidKey(f"invalid object key {key!r} (part {part!r})")
    return key


def object_key(*parts: object) -> str:
    """Join parts (org id, domain, entity id, file name) into a checked key."""
    return check_key("/".join(str(p) for p in parts))


def within(prefix: str, key: str) -> bool:
    """Whether `key` lies under `prefix` (a key prefix, without trailing slash)."""
    return key.startswith(check_key(prefix) + "/")


# -- What was stored: a `FileObject` (shared/db/models.py), the one row type of `file_objects` ----
#
# `commit()` returns one, built without a database: where and what was stored, and a fresh id;
# the caller names the owner (`org_id`) and records the row. The model is imported on commit,
# so importing the storage port loads no SQLAlchemy.


class ObjectWriter(io.RawIOBase, ABC):
    """A write-only binary stream to one object; nothing is visible before `commit()`."""

    def __init__(self, provider: str, bucket: str, key: str, content_type: str) -> None:
        super().__init__()
        self.provider, self.bucket, self.key = provider, bucket, check_key(key)
        self.content_type = content_type
        self.size = 0
        self._hash = hashlib.sha256()
        self.stored: FileObject | None = None
        self._finished = False
        #: Called with `resume_token` whenever it changes (e.g. a multipart upload started), so
        #: the caller can record it durably before anything could be left behind.
        self.on_token: Callable[[dict[str, Any]], None] | None = None

    # The io plumbing: zipfile and xlsxwriter write to it like to a non-seekable file.
    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.size

    def write(self, data: Any) -> int:
        if self._finished:
            raise ValueError(f"write to a finished object writer ({self.key})")
        view = memoryview(data).cast("B")
        n = len(view)
        if n:
            self._hash.update(view)
            self.size += n
            self._write(view)
        return n

    def commit(self) -> FileObject:
        """Make the object visible at its key; returns what was stored (its row, unsaved)."""
        if self.stored is not None:
            return self.stored
        if self._finished:
            raise StorageError(f"{self.key}: writer was aborted")
        from ..db.models import FileObject

        self._commit()
        self._finished = True
        self.stored = FileObject(
            provider=self.provider,
            bucket=self.bucket,
            key=self.key,
            content_type=self.content_type,
            size_bytes=self.size,
            sha256=self._hash.hexdigest(),
        )
        return self.stored

    def abort(self) -> None:
        """Discard everything written; safe to call twice or after a failed commit."""
        if self.stored is None:
            self._finished = True
            self._abort()

    def close(self) -> None:
        # Closing without commit discards: an object appears only by an explicit commit.
        if not self.closed:
            self.abort()
        super().close()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:
            self.abort()
        super().__exit__(kind, exc, tb)

    @property
    def resume_token(self) -> dict[str, Any]:
        """What another process needs to clean this write up after a crash (see `discard`)."""
        return {"key": self.key}

    def _token_changed(self) -> None:
        if self.on_token is not None:
            self.on_token(self.resume_token)

    @abstractmethod
    def _write(self, data: memoryview) -> None: ...

    @abstractmethod
    def _commit(self) -> None: ...

    @abstractmethod
    def _abort(self) -> None: ...


class StorageBackend(ABC):
    """Abstract base of the storage backends (`backends/local.py`, `backends/s3.py`)."""

    provider: str
    bucket: str

    @abstractmethod
    def open_writer(self, key: str, content_type: str) -> ObjectWriter:
        """A streaming writer; the object appears at `key` on `commit()` only."""

    @abstractmethod
    def discard(self, token: dict[str, Any]) -> None:
        """Remove what an unfinished writer left behind (its `resume_token`), e.g. after the
        process that wrote it was killed; a no-op when nothing is left."""

    @abstractmethod
    def open(self, key: str) -> IO[bytes]:
        """A binary stream of the object (raises `ObjectNotFound`)."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete the object; deleting a missing object is not an error."""

    @abstractmethod
    def list_keys(self, prefix: str) -> list[str]:
        """Keys of the committed objects under `prefix`."""

    @abstractmethod
    def pending(self) -> list[dict[str, Any]]:
        """Unfinished writes (partial files, open multipart uploads): should be empty at rest."""

    @abstractmethod
    def signed_url(self, key: str, *, expires_in: int, filename: str | None = None) -> str:
        """A link that downloads the object until `expires_in` seconds from now."""

    # -- Conveniences built on the primitives -------------------------------------------------

    def put(
        self, key: str, data: bytes | Iterable[bytes] | IO[bytes], content_type: str
    ) -> FileObject:
        """Store `data` (bytes, an iterable of chunks or a binary file) at `key`."""
        with self.open_writer(key, content_type) as writer:
            for chunk in _chunks(data):
                writer.write(chunk)
            return writer.commit()

    def read(self, key: str) -> bytes:
        with self.open(key) as stream:
            return stream.read()


def _chunks(data: bytes | Iterable[bytes] | IO[bytes], size: int = 1 << 20) -> Iterator[bytes]:
    if isinstance(data, bytes | bytearray | memoryview):
        yield bytes(data)
    elif hasattr(data, "read"):
        while chunk := data.read(size):
            yield chunk
    else:
        yield from data
