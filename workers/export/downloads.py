"""Links to a finished export: presigned (S3) or HMAC-signed and expiring (local), and the tiny
WSGI app that serves local signed links (`fleet export serve-links`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from shared.errors import FleetError, InvalidState
from shared.storage import InvalidKey, InvalidLink, ObjectNotFound, StorageBackend
from shared.storage.backends.local import LocalBackend

from . import store
from .build import download_name
from .wiring import Exporter


class ExportUnavailable(FleetError):
    """No finished export with that id for this org."""

    code = "NOT_FOUND"


def export_url(x: Exporter, export_id: UUID, org_id: UUID, *, ttl_s: int | None = None) -> str:
    """A download link of a COMPLETED export of `org_id` (lookups scoped by org)."""
    with x.pool.connection() as conn:
        row = store.get(conn, export_id, org_id)
        if row is None:
            raise ExportUnavailable(f"no export {export_id} for org {org_id}")
        if row.status != "COMPLETED" or row.file_object_id is None:
            raise InvalidState(
                f"export {export_id} is {row.status}; a link exists once it is COMPLETED"
            )
        fo = store.file_object(conn, row.file_object_id, org_id)
    if fo is None:
        raise ExportUnavailable(f"export {export_id} has no stored file")
    if fo.provider != x.storage.provider:
        raise InvalidState(
            f"export {export_id} is stored in {fo.provider}, this process uses {x.storage.provider}"
        )
    extension = fo.key.rsplit(".", 1)[-1]
    ttl = ttl_s or x.url_ttl_s
    return x.storage.signed_url(fo.key, expires_in=ttl, filename=download_name(row, extension))


StartResponse = Callable[..., Any]
#: Answers to a request that resolves to no object (any other `InvalidLink` is a 403).
_STATUS: dict[type[Exception], str] = {
    InvalidKey: "400 Bad Request",
    ObjectNotFound: "404 Not Found",
}


def links_app(
    storage: StorageBackend, clock: Callable[[], float] = time.time
) -> Callable[..., Iterable[bytes]]:
    """WSGI app: GET <base path>/<key>?expires=&sig=[&filename=] streams the object."""
    if not isinstance(storage, LocalBackend):
        raise InvalidState("signed links are served only for the local backend (S3 serves its own)")

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            link = storage.resolve_request(
                environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""), now=clock()
            )
            stream = storage.open(link.key)
        except (InvalidKey, InvalidLink, ObjectNotFound) as exc:
            # A path that is no object key (`..`, a dot file, an empty key) is the client's
            # error like a bad signature: a 4xx, not a 500 with a traceback in the log.
            body = f"{exc.code}: {exc}\n".encode()
            start_response(
                _STATUS.get(type(exc), "403 Forbidden"),
                [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
            )
            return [body]
        headers = [("Content-Type", "application/octet-stream")]
        if link.filename:
            headers.append(("Content-Disposition", f'attachment; filename="{link.filename}"'))
        start_response("200 OK", headers)
        return iter(lambda: stream.read(1 << 16), b"")

    return app
