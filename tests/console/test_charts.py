"""The Charts page (issue 32): runs finished per queue and per state, dead runs per queue,
send->start and duration percentiles, over the last hour or day, from the per-minute rollups
(`shared/run_stats.py`) and, after their watermark, from `job_runs` live."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared import run_stats
from tests.console.conftest import insert_run
from tests.console.test_security import client


def finished(db: Any, at: datetime, *, queue: str = "testq", status: str = "COMPLETED",
             wait_ms: float = 20, run_ms: float = 100, attempt: int = 1) -> str:  # fmt: skip
    started = at - timedelta(milliseconds=run_ms)
    return insert_run(db, queue=queue, status=status, attempt=attempt, finished_at=at,
                      started_at=started, queued_at=started - timedelta(milliseconds=wait_ms))  # fmt: skip


def totals(page: str, chart: str) -> dict[str, float]:
    section = page.split(f'data-test="chart-{chart}"')[1].split("</section>")[0]
    return {
        n: float(t) for n, t in re.findall(r'data-series="([^"]+)" data-total="([^"]+)"', section)
    }


def test_percentiles_of_a_histogram_are_within_its_bucket_width() -> None:
    # 100 runs: 1..100 ms. Bucket b holds [2^(b/3), 2^((b+1)/3)) ms.
    hist: dict[int, int] = {}
    for ms in range(1, 101):
        b = int(run_stats.PER_DOUBLING * __import__("math").log2(ms))
        hist[b] = hist.get(b, 0) + 1
    p50, p95, p99 = run_stats.percentiles(hist)
    for got, true in ((p50, 50), (p95, 95), (p99, 99)):
        assert abs(got - true) / true < 0.13, (got, true)
    assert run_stats.percentiles({}) == []


def test_the_rollup_counts_each_finished_run_once_and_the_charts_add_the_live_minutes(
    runtime: Any, db: Any, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    old = now - timedelta(minutes=30)
    for _ in range(4):
        finished(db, old, queue="email", wait_ms=10, run_ms=200)
    finished(db, old, queue="email", status="DEAD", run_ms=5000)
    finished(db, old, queue="email", attempt=3, wait_ms=60_000)  # a retry: no send->start
    finished(db, now - timedelta(seconds=5), queue="ai", run_ms=1000)  # not rolled up yet
    insert_run(db, status="FAILED")  # waiting for a retry: not finished
    # (email, COMPLETED), (email, DEAD), at each width (1 and 15 minutes)
    assert run_stats.roll_up(runtime, now=now) == 4
    assert run_stats.roll_up(runtime, now=now) == 0  # the watermark moved: nothing twice
    for span in run_stats.SPANS:
        rows = db.execute(
            "SELECT queue, status, runs FROM run_stats WHERE span = %s ORDER BY 1, 2", (span,)
        ).fetchall()
        assert rows == [("email", "COMPLETED", 5), ("email", "DEAD", 1)]
        waits = db.execute(
            "SELECT sum(runs) FROM run_latency WHERE span = %s AND kind = 'wait'"
            " AND queue = 'email'",
            (span,),
        ).fetchone()
        assert waits == (5,)  # the retried run is left out of send->start

    with client(runtime, tmp_path) as c:
        page = c.get("/charts").text
        day = c.get("/charts?range=day").text
        assert c.get("/charts?range=week").status_code == 400
    assert totals(page, "throughput") == {"ai": 1, "email": 6}
    assert totals(page, "states") == {"COMPLETED": 6, "DEAD": 1, "CANCELED": 0}
    assert totals(page, "failures") == {"ai": 0, "email": 1}
    assert totals(day, "throughput") == {"ai": 1, "email": 6}
    email = page.split('data-queue="email"')[1].split("</tr>")[0]
    # Each percentile is its bucket's middle, within 12 % of the true value: send->start
    # 10, 20, 20 ms (the retried run left out); duration 200 ms, 5 s, 5 s.
    assert 'data-label="send→start">9 ms / 18 ms / 18 ms<' in email
    assert 'data-label="duration">181 ms / 4.60 s / 4.60 s<' in email


def test_the_charts_say_when_the_rollup_is_behind(runtime: Any, db: Any, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    db.execute("INSERT INTO run_stats_watermark (upto) VALUES (%s)", (now - timedelta(hours=3),))
    finished(db, now - timedelta(minutes=40))  # neither rolled up nor in the live tail
    finished(db, now - timedelta(minutes=2))
    with client(runtime, tmp_path) as c:
        page = c.get("/charts").text
    assert "the scheduler's run-stats job is behind" in page
    assert totals(page, "throughput") == {"testq": 1}


@pytest.mark.parametrize("span", ["hour", "day"])
def test_the_live_part_is_what_the_page_polls(
    runtime: Any, db: Any, tmp_path: Path, span: str
) -> None:
    finished(db, datetime.now(UTC), queue=f"q-{uuid.uuid4().hex[:6]}")
    with client(runtime, tmp_path) as c:
        page = c.get(f"/charts?range={span}").text
        live = c.get(f"/charts/live?range={span}").text
    assert f'hx-get="/charts/live?range={span}"' in page
    assert "<h1>" not in live and totals(live, "throughput") == totals(page, "throughput")
