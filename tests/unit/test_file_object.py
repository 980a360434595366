"""One row type for `file_objects`: `shared.db.models.FileObject`, a mapped dataclass.

The storage port builds it with no database (what a commit stored, and a fresh id); the workers
read it back with `psycopg.rows.class_row` (by column name); importing the port loads no SQLAlchemy.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import uuid
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import inspect

from shared.db.models import FileObject
from shared.storage import object_key
from shared.storage.backends.local import LocalBackend

ROOT = Path(__file__).resolve().parents[2]


def test_a_commit_returns_the_row_to_record_without_a_database(tmp_path: Path) -> None:
    storage = LocalBackend(tmp_path, "docs", signing_key=b"k" * 32)

    stored = storage.put(object_key("orgs", "o1", "a.csv"), b"a,b\r\n", "text/csv")

    assert isinstance(stored, FileObject)
    assert (stored.provider, stored.bucket, stored.key) == ("LOCAL", "docs", "orgs/o1/a.csv")
    assert (stored.content_type, stored.size_bytes) == ("text/csv", 5)
    assert stored.sha256 == hashlib.sha256(b"a,b\r\n").hexdigest()
    assert isinstance(stored.id, uuid.UUID) and stored.org_id is None
    assert inspect(stored).transient  # an unsaved row: no session involved
    assert storage.put(object_key("orgs", "o1", "b.csv"), b"x", "text/csv").id != stored.id


def test_the_model_is_the_tables_columns_as_dataclass_fields() -> None:
    columns = {c.name for c in FileObject.__table__.columns}
    assert {f.name for f in fields(FileObject)} == columns


def test_a_row_builds_it_by_column_name() -> None:
    """What `class_row(FileObject)` does with a fetched row (the doc and export workers)."""
    row: dict[str, Any] = {
        "id": uuid.uuid4(),
        "org_id": uuid.uuid4(),
        "provider": "S3",
        "bucket": "exports",
        "key": "orgs/o/e/x.csv",
        "content_type": "text/csv",
        "size_bytes": 3,
        "sha256": "0" * 64,
        "created_at": datetime.now(UTC),
    }
    assert set(row) == {c.name for c in FileObject.__table__.columns}

    built = FileObject(**row)

    assert {name: getattr(built, name) for name in row} == row
    assert built == FileObject(**row)  # compared by value, like the dataclasses it replaced


def test_importing_the_storage_port_loads_no_sqlalchemy() -> None:
    code = "import sys, shared.storage; print(sorted(m for m in sys.modules if m == 'sqlalchemy'))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
