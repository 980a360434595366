"""A real S3-compatible HTTP server on loopback for the storage tests: moto's server app
(in a thread of the test process, no network beyond 127.0.0.1), behind a thin WSGI gate that

- enforces the expiry of presigned URLs (`X-Amz-Date` + `X-Amz-Expires`), as AWS S3 does and
  moto does not, so an expired link is refused with 403 like in production;
- can fail the upload of chosen multipart part numbers (HTTP 500, every retry), to prove that a
  failed part aborts the upload and leaves nothing behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from werkzeug.serving import BaseWSGIServer, make_server

Environ = dict[str, Any]
StartResponse = Callable[..., Any]


class S3Gate:
    def __init__(self, app: Callable[[Environ, StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self.failing_parts: set[int] = set()
        self.part_failures = 0
        self.clock: Callable[[], float] = time.time

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if "X-Amz-Expires" in query and "X-Amz-Date" in query:
            signed = datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            if self.clock() > signed.timestamp() + int(query["X-Amz-Expires"][0]):
                return _error(
                    start_response, "403 Forbidden", "AccessDenied", "Request has expired"
                )
        part = query.get("partNumber", ["0"])[0]
        if (
            environ["REQUEST_METHOD"] == "PUT"
            and "uploadId" in query
            and int(part) in self.failing_parts
        ):
            self.part_failures += 1
            environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            return _error(
                start_response,
                "500 Internal Server Error",
                "InternalError",
                "injected part failure",
            )
        return self.app(environ, start_response)


def _error(start_response: StartResponse, status: str, code: str, message: str) -> list[bytes]:
    body = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()
    start_response(
        status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
    )
    return [body]


def _quiet_handler() -> type:
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class QuietHandler(MotoRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

    return QuietHandler


class S3Server:
    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        self.gate = S3Gate(DomainDispatcherApplication(create_backend_app))
        self._server: BaseWSGIServer = make_server(
            "127.0.0.1", 0, self.gate, threaded=True, request_handler=_quiet_handler()
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> S3Server:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(10)

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
        )
