"""The Runs search: each filter alone, a time range in UTC, and keyset pages that neither skip
nor repeat a run when runs share a queued_at."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared.runtime import Runtime
from tests.console.conftest import TOKEN, insert_run
from tests.console.test_security import client


@pytest.fixture
def ops(runtime: Runtime, tmp_path: Path) -> Iterator[TestClient]:
    with client(runtime, tmp_path, token=TOKEN) as c:
        c.headers["Authorization"] = f"Bearer {TOKEN}"
        yield c


def listed(page: str) -> list[str]:
    return re.findall(r'<td class="id" data-label="job id"><a href="/runs/[^"]+">([^<]+)</a>', page)


def test_each_filter_finds_its_runs_only(ops: TestClient, db: Any) -> None:
    org, other = uuid.uuid4(), uuid.uuid4()
    noon = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    a = insert_run(db, org_id=org, status="DEAD", entity_id="inv-7", request_id="req-a",
                   queued_at=noon)  # fmt: skip
    b = insert_run(db, org_id=org, job_name="test:sleep", queued_at=noon + timedelta(hours=2))
    c = insert_run(db, org_id=other, request_id="req-c", queued_at=noon - timedelta(days=1))
    cases = {
        f"org_id={org}": [b, a],
        "job_name=test:sleep": [b],
        "status=DEAD": [a],
        "entity_id=inv-7": [a],
        "request_id=req-c": [c],
        # datetime-local values are UTC, as the page says
        "since=2026-11-02T11:00&until=2026-11-02T13:00": [a],
        "since=2026-11-02T11:00": [b, a],
        "until=2026-11-02T00:00": [c],
        f"org_id={org}&status=COMPLETED&job_name=test:echo": [],
    }
    for query, expected in cases.items():
        answer = ops.get(f"/runs?{query}")
        assert answer.status_code == 200, query
        assert listed(answer.text) == expected, query
    assert ops.get("/runs?status=NOPE").status_code == 400
    assert ops.get("/runs?org_id=not-a-uuid").status_code == 400
    assert ops.get("/runs?cursor=garbage").status_code == 400


def test_keyset_pages_cover_every_run_once_even_with_equal_queued_at(
    ops: TestClient, db: Any
) -> None:
    org = uuid.uuid4()
    at = datetime.now(UTC)
    runs = {
        insert_run(db, org_id=org, queued_at=at - timedelta(seconds=i // 7)) for i in range(120)
    }
    seen: list[str] = []
    url = f"/runs?org_id={org}"
    for _ in range(10):
        page = ops.get(url).text
        seen += listed(page)
        nxt = re.search(r'href="([^"]*cursor=[^"]+)" rel="next"', page)
        if nxt is None:
            break
        url = "/runs" + nxt.group(1).replace("&amp;", "&")
    assert len(seen) == len(set(seen)) == 120 and set(seen) == runs
