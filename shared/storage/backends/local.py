"""Local filesystem backend (the default; `var/storage/`).

Objects live at `<root>/<bucket>/<key>`. A writer streams into `<root>/.partial/<id>.part` and
`commit()` fsyncs and renames it into place (atomic on one filesystem), so readers never see a
half-written object and an aborted or crashed write leaves only a partial file that `abort()` or
`discard()` removes. Keys are checked (`check_key`) and the resolved path must stay under the
bucket directory. Links are HMAC-signed and expiring (`shared/storage/links.py`).
"""

from __future__ import annotations

import os
import secrets
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from .. import links
from ..backend import InvalidKey, ObjectNotFound, ObjectWriter, StorageBackend, check_key

PROVIDER = "LOCAL"


class LocalWriter(ObjectWriter):
    def __init__(self, backend: LocalBackend, key: str, content_type: str) -> None:
        super().__init__(PROVIDER, backend.bucket, key, content_type)
        self._target = backend.path(key)
        self._partial = backend.partial_dir / f"{uuid.uuid4().hex}.part"
        self._file: IO[bytes] | None = open(self._partial, "xb")  # noqa: SIM115 (closed on commit/abort)

    @property
    def resume_token(self) -> dict[str, Any]:
        return {"key": self.key, "partial": self._partial.name}

    def _write(self, data: memoryview) -> None:
        assert self._file is not None
        self._file.write(data)

    def _commit(self) -> None:
        assert self._file is not None
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        self._target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self._partial, self._target)

    def _abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._partial.unlink(missing_ok=True)


class LocalBackend(StorageBackend):
    provider = PROVIDER

    def __init__(
        self,
        root: str | Path,
        bucket: str,
        *,
        signing_key: bytes | None = None,
        link_base_url: str = "http://127.0.0.1:9180/files",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(root).resolve()
        self.bucket = check_key(bucket)
        self.base = self.root / self.bucket
        self.partial_dir = self.root / ".partial"
        self.base.mkdir(parents=True, exist_ok=True)
        self.partial_dir.mkdir(parents=True, exist_ok=True)
        self.link_base_url = link_base_url
        self.clock = clock
        self._signing_key = signing_key

    @property
    def signing_key(self) -> bytes:
        """The configured key, else a random one kept (0600) beside the objects."""
        if self._signing_key is None:
            path = self.root / ".signing-key"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                self._signing_key = path.read_bytes()
            else:
                self._signing_key = secrets.token_bytes(32)
                with os.fdopen(fd, "wb") as f:
                    f.write(self._signing_key)
        return self._signing_key

    def path(self, key: str) -> Path:
        """The file of `key`; raises `InvalidKey` if it would resolve outside the bucket."""
        path = (self.base / check_key(key)).resolve()
        if not path.is_relative_to(self.base):
            raise InvalidKey(f"object key {key!r} escapes the bucket")
        return path

    def open_writer(self, key: str, content_type: str) -> LocalWriter:
        return LocalWriter(self, key, content_type)

    def discard(self, token: dict[str, Any]) -> None:
        name = str(token.get("partial") or "")
        if name and check_key(name) == name and "/" not in name:
            (self.partial_dir / name).unlink(missing_ok=True)

    def open(self, key: str) -> IO[bytes]:
        try:
            return open(self.path(key), "rb")  # the caller closes it
        except FileNotFoundError:
            raise ObjectNotFound(f"no object {key!r}") from None

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def list_keys(self, prefix: str) -> list[str]:
        top = self.base / check_key(prefix) if prefix else self.base
        if not top.is_dir():
            return []
        return sorted(str(p.relative_to(self.base)) for p in top.rglob("*") if p.is_file())

    def pending(self) -> list[dict[str, Any]]:
        return [{"partial": p.name} for p in sorted(self.partial_dir.glob("*.part"))]

    def signed_url(self, key: str, *, expires_in: int, filename: str | None = None) -> str:
        expires = int(self.clock()) + expires_in
        return links.sign(
            self.link_base_url,
            self.signing_key,
            self.bucket,
            key,
            expires=expires,
            filename=filename,
        )

    def resolve_link(self, url: str, *, now: float | None = None) -> links.LinkRequest:
        """Check a link made by `signed_url` (signature, expiry); raises `InvalidLink`."""
        return links.verify_url(
            url,
            self.link_base_url,
            self.signing_key,
            self.bucket,
            now=self.clock() if now is None else now,
        )

    def resolve_request(
        self, path: str, query: str, *, now: float | None = None
    ) -> links.LinkRequest:
        """Check the path and query of an HTTP request for a link (what a link server gets)."""
        prefix = urlsplit(self.link_base_url).path.rstrip("/")
        return links.verify(
            path,
            query,
            self.signing_key,
            self.bucket,
            now=self.clock() if now is None else now,
            prefix=prefix,
        )
