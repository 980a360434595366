"""`python -m workers.export.links`: the server of local signed download links, which `make run`
starts after the fleet (an extra, on EXPORT_LINKS_PORT, default 9180: the port of
STORAGE_LINK_BASE_URL's default). Before, `make run` handed out links on :9180 that nothing
served until someone started `fleet export serve-links` by hand.

It answers `/health/ready` and `/health/live` (the launcher waits for them) and every other
path as the links app (`downloads.links_app`). With the S3 backend there is nothing to serve
(S3 serves its presigned links): it answers its health only and says so once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import structlog

log = structlog.get_logger("jobfleet.export")

App = Callable[..., Iterable[bytes]]


def app_with_health(links: App | None) -> App:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/health") or links is None:
            status = "200 OK" if path.startswith("/health") else "404 Not Found"
            body = json.dumps({"status": "ok" if links else "ok (no local links to serve)"})
            data = body.encode()
            start_response(
                status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
            )
            return [data]
        return links(environ, start_response)

    return app


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no access log on stderr
        return


def main() -> None:
    from shared.config import get_settings
    from shared.observability.logging import configure_logging
    from shared.storage.backends.local import LocalBackend
    from shared.storage.factory import build_storage

    from .downloads import links_app

    settings = get_settings()
    configure_logging(level=settings.log_level, fmt=settings.log_format, process="export-links")
    storage = build_storage(settings)
    links = links_app(storage) if isinstance(storage, LocalBackend) else None
    host = os.environ.get("EXPORT_LINKS_HOST", "127.0.0.1")
    port = int(os.environ.get("EXPORT_LINKS_PORT") or 9180)
    with make_server(host, port, app_with_health(links), handler_class=_Quiet) as server:
        log.info(
            "export.links_serving",
            url=f"http://{host}:{port}",
            link_base_url=settings.storage_link_base_url,
            serving=links is not None,
        )
        server.serve_forever()


if __name__ == "__main__":
    main()
