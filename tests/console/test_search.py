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
from tests.support.plans import indexes_used


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


def test_the_search_line_finds_runs_by_payload_field_error_text_and_fixed_fields(
    ops: TestClient, db: Any
) -> None:
    """Issue 32: the search covered fixed fields only; now payload paths and error text too."""
    org = uuid.uuid4()
    at = datetime.now(UTC)
    mail = insert_run(db, org_id=org, job_name="test:sleep", status="DEAD", queued_at=at,
                      payload={"to": "a@example.com", "params": {"format": "CSV"}, "n": 7},
                      error="SMTPServerDisconnected: Connection unexpectedly closed")  # fmt: skip
    other = insert_run(db, org_id=org, status="FAILED", queued_at=at - timedelta(seconds=1),
                       payload={"to": "b@example.com", "n": "7", "tags": ["vip", "eu"]},
                       error="TimeoutError: read timed out")  # fmt: skip
    done = insert_run(db, org_id=org, queued_at=at - timedelta(seconds=2), payload={"n": 8})
    cases = {
        'payload.to:"a@example.com"': [mail],
        "args.to:b@example.com": [other],
        "payload.params.format:CSV": [mail],
        "payload.n:7": [mail, other],  # the number 7 and the string "7"
        'payload.n:"7"': [other],
        "payload.tags:vip": [other],  # an element of an array
        "connection closed": [mail],  # every word, any case
        '"timed out"': [other],
        "error:TIMEOUT": [other],
        "-status:COMPLETED": [mail, other],
        "status:dead status:failed": [mail, other],
        "job:test:sleep": [mail],
        f"org:{org} code:nothing": [],
        "payload.n:8": [done],
    }
    for line, expected in cases.items():
        answer = ops.get("/runs", params={"q": line, "org_id": str(org)})
        assert answer.status_code == 200, (line, answer.text[:300])
        assert listed(answer.text) == expected, line
    # The search line and the form's fields combine.
    answer = ops.get("/runs", params={"q": "payload.n:7", "status": "DEAD"})
    assert listed(answer.text) == [mail]


def test_a_malformed_search_answers_what_is_wrong_on_the_page_itself(ops: TestClient) -> None:
    for line, said in {
        "colour:red": "unknown field &#39;colour&#39; at character 1",
        'payload.to:"unclosed': "unclosed quote",
        "ab": "at least 3 characters",
        "status:LOST": "unknown status &#39;LOST&#39;",
        "org:acme": "is not a UUID",
        "payload.a..b:1": "bad payload path",
    }.items():
        answer = ops.get("/runs", params={"q": line})
        assert answer.status_code == 400, line
        assert said in answer.text, (line, answer.text)
        assert 'data-test="bad-search"' in answer.text and "Search syntax" in answer.text
        assert "<h1>Runs</h1>" in answer.text  # the page, with the search kept in its form


def test_payload_and_error_searches_are_answered_by_their_indexes(db: Any) -> None:
    """The two conditions the search line adds can use migration 0017's GIN indexes, and their
    "frequent" form (`search._plan`) cannot."""
    from shared.console import query

    def plan(sql: list[str], params: list[Any]) -> str:
        rows = db.execute(f"EXPLAIN SELECT job_id FROM job_runs WHERE {' AND '.join(sql)}", params)
        return "\n".join(r[0] for r in rows.fetchall())

    def used(sql: list[str], params: list[Any]) -> set[str]:  # a partition's as its parent's
        return indexes_used(db, f"SELECT job_id FROM job_runs WHERE {' AND '.join(sql)}", params)

    db.execute("SET enable_seqscan = off")
    for line, index in {
        'payload.to:"a@example.com"': "ix_job_runs_console_payload",
        "refused": "ix_job_runs_console_error",
    }.items():
        compiled = query.compile(line)
        indexed = plan(*compiled.sql())
        assert index in used(*compiled.sql()) and "Index Cond" in indexed, (line, indexed)
        frequent = plan(*compiled.sql(frozenset(compiled.fuzzy)))
        assert "Index Cond" not in frequent, (line, frequent)  # a filter, not an index match
    db.execute("RESET enable_seqscan")


def test_many_matches_are_found_by_walking_the_runs_in_order_with_the_same_answer(
    ops: TestClient, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared.console import search

    org = uuid.uuid4()
    at = datetime.now(UTC)
    runs = [
        insert_run(db, org_id=org, queued_at=at - timedelta(seconds=i), payload={"k": "v"})
        for i in range(12)
    ]
    rare = insert_run(db, org_id=org, queued_at=at - timedelta(seconds=20),
                      payload={"k": "v"}, error="ConnectionRefusedError: refused")  # fmt: skip
    url = f"/runs?org_id={org}&q=payload.k:v"
    both = f"/runs?org_id={org}&q=payload.k:v refused"
    through_index = listed(ops.get(url).text)
    assert listed(ops.get(both).text) == [rare]
    monkeypatch.setattr(search, "FUZZY_PROBE", 3)  # now "many": walk newest first, filter
    monkeypatch.setattr(search, "_probed", {})  # and no answer reused from before
    assert listed(ops.get(url).text) == through_index == [*runs, rare]
    assert listed(ops.get(both).text) == [rare]  # the payload's many, the error's one
