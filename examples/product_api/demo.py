"""The demo's frontend (the registration's `demo`): work sent over HTTP through the example product API (`fleet demo`).

When the product API that `make run` starts answers (`PRODUCT_API_URL`, default
http://127.0.0.1:8180, key `PRODUCT_API_KEY`, default the development key of org A), the demo
does what a frontend would: `POST /exports` and `POST /emails`, then polls each job's status URL
(`GET /jobs/{job_id}`) until it settles, and asks for the export's download link. Otherwise the
scenario is skipped and says why. Plain HTTP (urllib), as a frontend would.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any
from uuid import UUID

from shared.cli.scenario import Scenario
from shared.runtime import Runtime

DEFAULT_URL = "http://127.0.0.1:8180"
DEFAULT_KEY = "dev-key-org-a"
SETTLED = {"COMPLETED", "DEAD", "CANCELED"}


class ProductApi(Scenario):
    """An export and an email requested over HTTP, followed at their status URLs."""

    def __init__(self, url: str | None = None, key: str | None = None) -> None:
        super().__init__("product-api")
        self.url = (url or os.environ.get("PRODUCT_API_URL") or DEFAULT_URL).rstrip("/")
        self.key = key or os.environ.get("PRODUCT_API_KEY") or DEFAULT_KEY
        self.jobs: dict[str, dict[str, Any]] = {}
        self.status: dict[str, str] = {}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"X-API-Key": self.key, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return int(answer.status), json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def start(self, rt: Runtime) -> None:
        try:
            ready, _ = self.call("GET", "/health/ready")
        except (OSError, ValueError):
            ready = 0
        if ready != 200:
            self.skipped = f"no product API answers at {self.url} (make run starts it)"
            return
        requests = {
            "export": ("/exports", {"type": "JOB_RUNS", "params": {"format": "XLSX"}}),
            "email": (
                "/emails",
                {
                    "template_key": "otp-code",
                    "recipient_email": "frontend@example.com",
                    "variables": {"CODE": "204 815", "EXPIRES_MINUTES": 10},
                },
            ),
        }
        for name, (path, body) in requests.items():
            status, answer = self.call("POST", path, body)
            if status != 202:
                self.notes.append(f"POST {path} answered {status}: {answer}")
                continue
            self.jobs[name] = answer

    def pending(self, rt: Runtime) -> bool:
        for name, accepted in self.jobs.items():
            if self.status.get(name) in SETTLED:
                continue
            status, run = self.call("GET", accepted["status_url"])
            if status == 200:  # 404 until the outbox relay has published it
                self.status[name] = run["status"]
        return any(self.status.get(name) not in SETTLED for name in self.jobs)

    def results(self, rt: Runtime) -> list[str]:
        lines = [
            f"over HTTP ({self.url}): {name} {self.status.get(name, 'not published')}, "
            f"follow it at {self.url}{accepted['events_url']}"
            for name, accepted in self.jobs.items()
        ]
        export = self.jobs.get("export")
        if export is not None and self.status.get("export") == "COMPLETED":
            status, link = self.call("GET", f"/exports/{export['id']}/download")
            lines.append(
                f"the export's signed link: {link['url']}"
                if status == 200
                else f"download link: {status} {link}"
            )
        return lines + self.notes


def scenario(org: UUID, *, small: bool) -> Scenario:
    """`fleet demo`'s step: the product API picks the org from its key, not from `org`."""
    return ProductApi()
