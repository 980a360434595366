"""Fixtures of the console tests: the console served by uvicorn in a thread of the test (on the
test's runtime, so that an in-process worker runs what it replays), seeded runs, and headless
Chromium (the Debian package, `shared/install_test_chromium.sh`) driven by Playwright."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from shared.console.settings import ConsoleSettings
from shared.runtime import Runtime

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
TOKEN = "console-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    url: str
    settings: ConsoleSettings


@contextmanager
def serve(settings: ConsoleSettings, runtime: Runtime, state_file: Path) -> Iterator[Served]:
    import uvicorn

    from shared.console.app import create_app

    app = create_app(settings, runtime=lambda: runtime, state_file=state_file)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="console", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the console did not start"
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}", settings)
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def console(runtime: Runtime, tmp_path: Path) -> Iterator[Served]:
    """The console with a token, polling its overview twice a second."""
    settings = ConsoleSettings(token=TOKEN, token_operator="ops@example.com", refresh_s=0.5)
    with serve(settings, runtime, tmp_path / "fleet.json") as served:
        yield served


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `bash shared/install_test_chromium.sh`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where the test's screenshots go (a test artifact: `pytest --basetemp DIR` keeps them)."""
    path = tmp_path / "screenshots"
    path.mkdir()
    return path


# -- seeded runs -----------------------------------------------------------------------------


def insert_run(db: psycopg.Connection[Any], **fields: Any) -> str:
    row: dict[str, Any] = {
        "org_id": uuid.uuid4(),
        "job_name": "test:echo",
        "queue": "testq",
        "status": "COMPLETED",
        "payload": {},
        "attempt": 1,
        **fields,
    }
    row.setdefault("job_id", f"{row['org_id']}:{row['job_name']}:{uuid.uuid4()}:0")
    for key in ("payload", "result", "progress", "checkpoint"):
        if key in row and row[key] is not None:
            row[key] = Jsonb(row[key])
    columns = ", ".join(row)
    marks = ", ".join(["%s"] * len(row))
    db.execute(f"INSERT INTO job_runs ({columns}) VALUES ({marks})", list(row.values()))
    return str(row["job_id"])


def dead_echo(db: psycopg.Connection[Any], org: uuid.UUID, message: str = "hello") -> str:
    """A DEAD run of the tests' echo job whose payload is valid and whose job id matches it, as
    if it had died of an outage: a replay runs it for real."""
    from tests.support.jobs import ECHO

    model = ECHO.build({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": message})
    return insert_run(
        db,
        org_id=org,
        job_id=ECHO.job_id(model),
        entity_type="echo",
        entity_id=str(model.entity_id),
        payload=model.wire(),
        status="DEAD",
        attempt=3,
        max_attempts=3,
        error_code="SMTP_OUTAGE",
        error="outage window exhausted: 421 try later",
        finished_at=datetime.now(UTC),
    )
