"""Storage fixtures: a local backend under the test's tmp dir, and an S3 backend on a real
S3-compatible server on loopback (tests/support/s3_server.py), emptied before each test.

Imported by the conftest of each folder that uses them: tests/integration (the storage port's
tests) and tests/workers/export (the export worker writes through both)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.storage.backends.local import LocalBackend
from shared.storage.backends.s3 import S3Backend
from tests.support.s3_server import S3Server

BUCKET = "jobfleet-exports"


@pytest.fixture
def local_storage(tmp_path: Path) -> LocalBackend:
    return LocalBackend(tmp_path / "storage", "exports", signing_key=b"k" * 32)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server().start()
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


@pytest.fixture
def s3_storage(s3_server: S3Server) -> Iterator[S3Backend]:
    s3_server.gate.failing_parts = set()
    backend = S3Backend(s3_server.client(), BUCKET, part_size=5 * 1024 * 1024)
    for key in backend.list_keys(""):
        backend.delete(key)
    for upload in backend.pending():
        backend.discard(upload)
    yield backend
    s3_server.gate.failing_parts = set()
