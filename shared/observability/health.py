"""`/health/live`, `/health/ready` and `/metrics` on a small HTTP server per process.

One process, one port: the socket is bound without SO_REUSEPORT, so a second process asking
for a port that a running fleet holds fails at once with `HealthPortInUse` ("port ... in use by
another process") instead of sharing it, with both answering at random. Every process of the
fleet runs Dramatiq with `--processes 1` and gets its own port (`launcher/plan.py`).
"""

from __future__ import annotations

import errno
import hmac
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog

from ..errors import FleetError
from .metrics import render

log = structlog.get_logger("jobfleet.health")

Check = Callable[[], None]
BACKLOG_PATH = re.compile(r"/queues/([A-Za-z0-9_.-]+)/backlog")


class HealthPortInUse(FleetError, OSError):
    """The health port is in use by another process."""

    code = "PORT_IN_USE"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # SO_REUSEADDR only: a port whose old connections linger in TIME_WAIT may be bound again,
    # a port another process listens on may not (that would take SO_REUSEPORT).
    allow_reuse_address = True


class HealthServer:
    def __init__(
        self,
        *,
        host: str,
        port: int,
        service: str,
        checks: dict[str, Check],
        metrics_token: str | None = None,
        collector: Any = None,
        backlog: Callable[[str], dict[str, Any] | None] | None = None,
    ) -> None:
        self.service = service
        # `/queues/<queue>/backlog` (behind the metrics token): a queue's backlog for an
        # autoscaler, None for a queue this process does not know.
        self.backlog = backlog
        self.checks = checks
        self.metrics_token = metrics_token
        self.collector = collector
        try:
            self._httpd = _Server((host, port), self._handler())
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise HealthPortInUse(
                f"{service}: health port {host}:{port} is in use by another process"
                " (another fleet running? stop it, or set HEALTH_PORT / HEALTH_BASE_PORT)"
            ) from None
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="jobfleet-health", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        log.info(
            "health.serving",
            service=self.service,
            url=f"http://{self._httpd.server_address[0]!s}:{self.port}/health/ready",
        )
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def ready(self) -> tuple[bool, dict[str, str]]:
        report: dict[str, str] = {}
        for name, check in self.checks.items():
            try:
                check()
                report[name] = "ok"
            except Exception as exc:
                report[name] = f"error: {exc}"[:300]
        return all(v == "ok" for v in report.values()), report

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/health/live":
                    self._json(200, {"status": "live", "service": server.service})
                elif path == "/health/ready":
                    ok, report = server.ready()
                    self._json(
                        200 if ok else 503,
                        {
                            "status": "ready" if ok else "not ready",
                            "service": server.service,
                            "checks": report,
                        },
                    )
                elif path == "/metrics":
                    if not self._authorized():
                        self._json(401, {"error": "bearer token required"})
                        return
                    body = render(server.collector)
                    self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")
                elif server.backlog is not None and (match := BACKLOG_PATH.fullmatch(path)):
                    if not self._authorized():
                        self._json(401, {"error": "bearer token required"})
                        return
                    self._backlog(match.group(1))
                else:
                    self._json(
                        404,
                        {
                            "error": "not found",
                            "paths": ["/health/live", "/health/ready", "/metrics"]
                            + (["/queues/<queue>/backlog"] if server.backlog else []),
                        },
                    )

            def _backlog(self, queue: str) -> None:
                assert server.backlog is not None
                try:
                    body = server.backlog(queue)
                except Exception as exc:  # Redis down: the autoscaler keeps its last value
                    self._json(503, {"error": f"{type(exc).__name__}: {exc}"[:300]})
                    return
                if body is None:
                    self._json(404, {"error": f"unknown queue {queue!r}"})
                else:
                    self._json(200, body)

            def _authorized(self) -> bool:
                if not server.metrics_token:
                    return True
                header = self.headers.get("Authorization", "")
                return hmac.compare_digest(header, f"Bearer {server.metrics_token}")

            def _json(self, status: int, body: dict[str, Any]) -> None:
                self._send(status, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # quiet access log
                return

        return Handler
