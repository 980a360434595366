"""Issue 32, second round, in a real browser (headless Chromium, Playwright) at 1280x800 and
390x844, as an operator works: the search line, bulk actions across states, the Nodes page and
the charts. Each test finds something, acts, and sees the effect; screenshots go to the test's
tmp dir (`screenshots/`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.console.conftest import Served, insert_run
from tests.console.test_browser import NARROW, WIDE, shoot, signed_in

pytestmark = pytest.mark.slow
VIEWPORTS = pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280x800", "390x844"])


def no_sideways_scroll(page: Any, viewport: dict[str, int]) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"{page.url} is {width} px wide at {viewport['width']}"


@VIEWPORTS
def test_an_operator_finds_runs_by_a_payload_field_and_error_words(
    chromium: Any, console: Served, db: Any, shots: Path, viewport: dict[str, int]
) -> None:
    org = uuid.uuid4()
    now = datetime.now(UTC)
    wanted = insert_run(db, org_id=org, status="DEAD", queued_at=now,
                        payload={"to": f"{org}@example.com"},
                        error="SMTPRecipientsRefused: 550 mailbox unavailable")  # fmt: skip
    insert_run(db, org_id=org, status="DEAD", queued_at=now, payload={"to": "x@example.com"},
               error="SMTPRecipientsRefused: 550 mailbox unavailable")  # fmt: skip
    page = signed_in(chromium, console, viewport)
    page.goto("/runs")
    page.click("summary:has-text('Search syntax')")
    assert page.locator("#syntax").get_attribute("open") is not None
    page.fill("input[name=q]", f'payload.to:"{org}@example.com" mailbox')
    page.click("button:has-text('Search')")
    page.wait_for_url("**q=**")
    assert page.locator("td.id a").all_inner_texts() == [wanted]
    no_sideways_scroll(page, viewport)
    shoot(page, shots, f"search-payload-{viewport['width']}")

    page.fill("input[name=q]", 'payload.to:unclosed"')
    page.click("button:has-text('Search')")
    page.wait_for_selector("[data-test=bad-search]")
    said = page.locator("[data-test=bad-search]").inner_text()
    assert "unclosed quote" in said or "cannot read" in said, said
    assert page.locator("input[name=q]").input_value() == 'payload.to:unclosed"'
    no_sideways_scroll(page, viewport)
    shoot(page, shots, f"search-malformed-{viewport['width']}")
    page.context.close()


@VIEWPORTS
def test_an_operator_retries_then_deletes_a_searchs_runs_across_states_after_dry_runs(
    chromium: Any, console: Served, db: Any, shots: Path, viewport: dict[str, int]
) -> None:
    org = uuid.uuid4()
    req = f"across-{org}"
    runs = {s: insert_run(db, org_id=org, status=s, request_id=req, attempt=1)
            for s in ("DEAD", "CANCELED", "COMPLETED", "QUEUED")}  # fmt: skip
    page = signed_in(chromium, console, viewport)
    page.goto(f"/runs?request_id={req}")
    page.click("button:has-text('Retry the dead and canceled runs')")
    page.wait_for_selector("[data-test=dry-run]")
    assert "Dry run: 2" in page.locator("[data-test=dry-run]").inner_text()
    no_sideways_scroll(page, viewport)
    shoot(page, shots, f"bulk-retry-dry-run-{viewport['width']}")
    page.click("button:has-text('Retry 2 run(s)')")
    page.wait_for_selector("text=retried 2 of 2")
    statuses = page.locator("td[data-label=status] .badge").all_inner_texts()
    assert sorted(statuses) == ["COMPLETED", "QUEUED", "QUEUED", "QUEUED"]
    shoot(page, shots, f"bulk-retried-{viewport['width']}")

    page.click("button:has-text('Delete the finished runs')")
    page.wait_for_selector("[data-test=dry-run]")
    assert "Dry run: 1" in page.locator("[data-test=dry-run]").inner_text()
    page.click("button:has-text('Delete 1 run(s)')")
    page.wait_for_selector("text=deleted 1 of 1")
    assert page.locator("td.id a").count() == 3
    gone = db.execute("SELECT 1 FROM job_runs WHERE job_id = %s", (runs["COMPLETED"],))
    assert gone.fetchone() is None
    page.context.close()


@VIEWPORTS
def test_an_operator_finds_what_a_stale_consumer_was_and_what_a_node_runs(
    chromium: Any, console: Served, runtime: Any, fleet: Any, db: Any, shots: Path,
    viewport: dict[str, int],
) -> None:  # fmt: skip
    from shared.broker import nodes
    from shared.pauses import redis_client
    from tests.console.test_nodes import silent_node

    ns = runtime.settings.broker_namespace
    r = redis_client(runtime)
    silent = silent_node(runtime)
    me = next(n for n in nodes.read(r, ns) if n.id != silent.id and n.stopped_ms is None)
    busy = insert_run(db, status="RUNNING", lease_owner=me.lease_owner,
                      started_at=datetime.now(UTC), progress={"done": 1, "total": 4})  # fmt: skip

    page = signed_in(chromium, console, viewport)
    page.click("header nav a:text-is('Nodes')")
    page.wait_for_selector("h1:has-text('Nodes')")
    # Stale, or already gone: the live worker's maintenance requeues a silent one's messages
    # and drops its heartbeat within a beat. Either way the page says which process it was.
    silent_card = page.locator(f"[data-test=node]:has-text('{silent.id}')")
    assert silent_card.get_attribute("data-state") in ("stale", "gone")
    why = silent_card.locator("[data-test=why]").inner_text()
    assert "Was worker-email (pid 4242 on box-7, queues email)" in why
    alive = page.locator("[data-test=node][data-state=alive]")
    assert busy in alive.inner_text() and "testq" in alive.inner_text()
    no_sideways_scroll(page, viewport)
    page.screenshot(path=str(shots / f"nodes-{viewport['width']}.png"), full_page=True)
    alive.locator(f"a:has-text('{busy[:20]}')").click()
    page.wait_for_selector("h1:has-text('Run')")
    assert "RUNNING" in page.locator("h1").inner_text()
    page.context.close()


@VIEWPORTS
def test_an_operator_watches_the_charts_update_live_and_switches_to_the_day(
    chromium: Any, console: Served, runtime: Any, db: Any, shots: Path, viewport: dict[str, int]
) -> None:
    from shared import run_stats
    from tests.console.test_charts import finished
    from tests.support.wait import wait_for

    now = datetime.now(UTC)
    for i in range(6):
        finished(db, now - timedelta(minutes=i * 7), queue="email", run_ms=150 + 40 * i)
    finished(db, now - timedelta(minutes=12), queue="email", status="DEAD", run_ms=3000)
    run_stats.roll_up(runtime, now=now)  # the scheduler's run-stats job
    page = signed_in(chromium, console, viewport)
    page.click("header nav a:text-is('Charts')")
    page.wait_for_selector("h1:has-text('Charts')")
    line = "[data-test=chart-throughput] polyline[data-series=email]"
    assert page.locator(line).get_attribute("data-total") == "7"
    assert (
        page.locator("[data-test=chart-failures] polyline[data-series=email]").get_attribute(
            "data-total"
        )
        == "1"
    )
    assert "email" in page.locator("[data-test=latency]").inner_text()
    no_sideways_scroll(page, viewport)
    page.screenshot(path=str(shots / f"charts-hour-{viewport['width']}.png"), full_page=True)

    finished(db, datetime.now(UTC), queue="email")  # one more finishes: the poll shows it
    wait_for(lambda: page.locator(line).get_attribute("data-total") == "8", timeout=10,
             what="the chart's live refresh")  # fmt: skip
    page.click("nav.tabs a:has-text('Last day')")
    page.wait_for_url("**range=day**")
    assert page.locator(line).get_attribute("data-total") == "8"
    no_sideways_scroll(page, viewport)
    shoot(page, shots, f"charts-day-{viewport['width']}")
    page.context.close()
