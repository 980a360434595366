"""The example API's own tests, as a product writes them: the jobfleet test kit, no Redis and no
Postgres (`pytest examples/product_api/tests`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from examples.product_api.app import create_app
from shared.storage.backends.local import LocalBackend
from shared.testing import JobCapture, RecordingSession

pytest_plugins = ["shared.testing.plugin"]

KEY_A, KEY_B = "dev-key-org-a", "dev-key-org-b"


class Api:
    def __init__(self, client: TestClient, storage: LocalBackend) -> None:
        self.client = client
        self.storage = storage
        self.sessions: list[RecordingSession] = []


@pytest.fixture
def api(jobfleet: JobCapture, tmp_path: Path) -> Iterator[Api]:
    storage = LocalBackend(tmp_path, "documents", signing_key=b"k" * 32)
    sessions: list[RecordingSession] = []

    def session() -> RecordingSession:
        sessions.append(jobfleet.session())
        return sessions[-1]

    app = create_app(sessions=session, storage=storage)  # type: ignore[arg-type]
    with TestClient(app, headers={"X-API-Key": KEY_A}) as client:
        api = Api(client, storage)
        api.sessions = sessions
        yield api
