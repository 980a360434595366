"""The console in a real browser (headless Chromium, Playwright): every page loads and reads
well at 1280x800 and on a phone; an operator signs in, searches, opens a run, replays a dead job
and sees it complete, pauses a queue; a POST without the CSRF token and a page without auth are
refused. Screenshots of each page are saved under the test's tmp dir (`screenshots/`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.console.conftest import TOKEN, Served, dead_echo, insert_run
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 390, "height": 844}


def signed_in(chromium: Any, console: Served, viewport: dict[str, int]) -> Any:
    context = chromium.new_context(viewport=viewport, base_url=console.url)
    page = context.new_page()
    page.goto("/")
    page.fill("input[name=token]", TOKEN)
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("h1:has-text('Overview')")
    return page


def runs_of_request(page: Any, request_id: str) -> Any:
    """The runs page, searched by request id, as an operator types it."""
    page.goto("/runs")
    page.fill("input[name=request_id]", request_id)
    page.click("button:has-text('Search')")
    page.wait_for_url("**request_id=**")
    return page


def shoot(page: Any, shots: Path, name: str) -> None:
    page.screenshot(path=str(shots / f"{name}.png"), full_page=False)


def seed(db: Any) -> dict[str, Any]:
    org, other = uuid.uuid4(), uuid.uuid4()
    now = datetime.now(UTC)
    for i in range(60):  # more than a page of this org's runs
        insert_run(
            db, org_id=org, status="COMPLETED", queued_at=now - timedelta(minutes=i + 1),
            started_at=now - timedelta(minutes=i + 1), finished_at=now - timedelta(minutes=i) ,
            result={"echo": f"n{i}"},
        )  # fmt: skip
    secret = insert_run(
        db, org_id=org, status="FAILED", request_id="req-42", error_code="RUNTIMEERROR",
        error="Traceback (most recent call last):\n  ...\nRuntimeError: boom",
        payload={"message": "hi", "api_key": "sk-live-SECRET", "nested": {"password": "hunter2"}},
        progress={"done": 3, "total": 10}, queued_at=now,
    )  # fmt: skip
    insert_run(db, org_id=other, status="RUNNING", job_name="test:sleep", queued_at=now)
    dead = dead_echo(db, org)
    more_dead = [
        insert_run(
            db,
            org_id=other,
            status="DEAD",
            error_code="TEST_PERMANENT",
            error="cannot ever work",
            finished_at=now,
            queued_at=now - timedelta(seconds=i),
        )
        for i in range(3)
    ]
    db.execute(
        "INSERT INTO outbox_events (org_id, type, job_name, job_id, payload, status, attempts, error)"
        " VALUES (%s, 'x', 'email:send', 'j-outbox-1', '{}', 'FAILED', 5, 'BROKER_UNAVAILABLE: redis down')",
        (org,),
    )
    db.execute(
        "INSERT INTO ai_usage (org_id, model, day, requests, tokens_in, tokens_out, cost)"
        " VALUES (%s, 'gpt-test', current_date, 12, 3400, 800, 0.0421)",
        (org,),
    )
    db.execute(
        "INSERT INTO email_suppressions (org_id, email, reason, detail)"
        " VALUES (%s, 'bounced@example.com', 'BOUNCED', '550 no such user')",
        (org,),
    )
    db.execute(
        "INSERT INTO chain_actions (job_id, type, round_id, status, tx_hash, attempts)"
        " VALUES ('claim_prize-31337-0xabc-7-0xdef', 'CLAIM_PRIZE', 7, 'CONFIRMED', '0x' || repeat('ab', 32), 1)"
    )
    db.execute(
        "INSERT INTO keeper_actions (chain_id, contract, ran_at, holder, outcome, round_id)"
        " VALUES (31337, '0x0000000000000000000000000000000000000001', now(), 'scheduler-1',"
        " 'draw_requested', 7)"
    )
    db.execute(
        "INSERT INTO console_audit (actor, action, target, count, client)"
        " VALUES ('ops@example.com', 'purge', 'selection of 2', 2, '127.0.0.1')"
    )
    return {"org": org, "other": other, "secret": secret, "dead": dead, "more_dead": more_dead}


def test_an_operator_finds_a_dead_job_replays_it_and_sees_it_complete(
    chromium: Any, console: Served, fleet: Any, db: Any, shots: Path
) -> None:
    data = seed(db)
    page = signed_in(chromium, console, WIDE)

    # Overview: queues with the dead runs, the DLQ state; it refreshes by itself.
    assert page.locator("text=DLQ alert").count() == 1
    row = page.locator("tr:has(td strong:text-is('testq'))")
    assert row.locator("td").nth(4).inner_text().strip() == "4"  # dead
    first = page.locator("p.live").inner_text()
    wait_for(lambda: page.locator("p.live").inner_text() != first, timeout=10, what="a refresh")
    shoot(page, shots, "overview-1280")

    # Runs: search by org (keyset pages of 50), then by request id; open the failed run.
    page.goto(f"/runs?org_id={data['org']}")
    assert page.locator("td.id a").count() == 50
    shoot(page, shots, "runs-1280")
    page.click("text=older »")
    assert page.locator("td.id a").count() == 62 - 50
    page.goto("/runs")
    page.fill("input[name=request_id]", "req-42")
    page.click("button:has-text('Search')")
    page.wait_for_url("**request_id=req-42**")
    assert page.locator("td.id a").count() == 1
    page.click("td.id a")
    page.wait_for_selector("h1:has-text('Run')")
    payload = page.locator("[data-test=payload]").inner_text()
    assert "sk-live-SECRET" not in payload and "hunter2" not in payload and '"***"' in payload
    assert "RuntimeError: boom" in page.locator("[data-test=error]").inner_text()
    assert "3 / 10" in page.content()
    shoot(page, shots, "run-1280")

    # Dead letters: filter by error code, replay the echo run from its row.
    page.goto("/dead")
    page.select_option("select[name=error_code]", "SMTP_OUTAGE")
    page.click("button:has-text('Search')")
    page.wait_for_url("**error_code=SMTP_OUTAGE**")
    assert page.locator("td.id a").all_inner_texts() == [data["dead"]]
    shoot(page, shots, "dead-1280")
    page.click("tr:has(td.id) button:has-text('Replay')")
    page.wait_for_selector("text=replayed 1 run(s)")

    # ... and it completes (the in-process worker runs it): its page says so, with the replay.
    def completed() -> bool:
        page.goto(f"/runs/{data['dead']}")
        return page.locator("h1 .badge").inner_text() == "COMPLETED"

    wait_for(completed, timeout=20, interval=0.3, what="the replayed run to complete")
    assert "ops@example.com" in page.locator("section:has(h2:text-is('Replays'))").inner_text()
    assert '"echo": "hello"' in page.locator("[data-test=result]").inner_text()
    shoot(page, shots, "run-replayed-1280")

    # Bulk replay of a filter: a dry run first (how many; nothing changes), then for real.
    page.goto(f"/dead?org_id={data['other']}")
    page.click("button:has-text('Replay all matching')")
    assert "3" in page.locator("[data-test=dry-run] strong").inner_text()
    shoot(page, shots, "dead-dry-run-1280")
    status = "SELECT status, replayed_by FROM job_runs WHERE job_id = ANY(%s)"
    assert {r[0] for r in db.execute(status, (data["more_dead"],))} == {"DEAD"}
    page.click("button:has-text('Replay 3 run(s)')")
    page.wait_for_selector("text=replayed 3 run(s)")
    rows = db.execute(status, (data["more_dead"],)).fetchall()
    assert {r[1] for r in rows} == {"ops@example.com"} and "DEAD" not in {r[0] for r in rows}
    audit = db.execute(
        "SELECT actor, action, count FROM console_audit WHERE action = 'replay' ORDER BY id"
    ).fetchall()
    assert audit == [("ops@example.com", "replay", 1), ("ops@example.com", "replay", 3)]

    # Outbox: a failed event retried now.
    page.goto("/outbox")
    shoot(page, shots, "outbox-1280")
    page.check("input[name=event_id]")
    page.click("text=Retry selected now")
    page.wait_for_selector("text=1 event(s) due now")
    assert db.execute("SELECT status, attempts FROM outbox_events").fetchone() == ("PENDING", 0)

    for name in ("tenants", "chain", "audit"):
        page.goto(f"/{name}")
        shoot(page, shots, f"{name}-1280")
    assert "0.0421" in page.goto("/tenants").text() and "bounced@example.com" in page.content()
    page.context.close()


def test_an_operator_pauses_and_resumes_a_queue_from_the_overview(
    chromium: Any, console: Served, runtime: Any, db: Any
) -> None:
    from shared.pauses import paused_queues, redis_client

    page = signed_in(chromium, console, WIDE)
    page.fill("#reason-q-email", "SMTP provider banning us")
    page.click("tr:has(td strong:text-is('email')) button:has-text('Pause')")
    page.wait_for_selector("text=paused queue email")
    pause = paused_queues(redis_client(runtime), runtime.settings.broker_namespace)["email"]
    assert (pause.by, pause.reason) == ("ops@example.com", "SMTP provider banning us")
    assert "PAUSED" in page.locator("tr:has(td strong:text-is('email'))").inner_text()
    page.click("tr:has(td strong:text-is('email')) button:has-text('Resume')")
    page.wait_for_selector("text=resumed queue email")
    assert "email" not in paused_queues(redis_client(runtime), runtime.settings.broker_namespace)
    rows = db.execute("SELECT action, actor FROM pause_audit ORDER BY id").fetchall()
    assert rows == [("pause", "ops@example.com"), ("resume", "ops@example.com")]
    page.context.close()


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280x800", "390x844"])
def test_an_operator_finds_a_queued_run_and_cancels_it_from_its_page(
    chromium: Any, console: Served, db: Any, shots: Path, viewport: dict[str, int]
) -> None:
    """Issue 32: cancel was CLI and API only; the run page offered only a replay."""
    org = uuid.uuid4()
    queued = insert_run(db, org_id=org, status="QUEUED", attempt=0, request_id=f"req-{org}")
    page = runs_of_request(signed_in(chromium, console, viewport), f"req-{org}")
    page.click("td.id a")
    page.wait_for_selector("h1:has-text('Run')")
    assert "QUEUED" in page.locator("h1").inner_text()
    page.click("button:has-text('Cancel this run')")
    page.wait_for_selector("text=canceled:")
    assert "CANCELED" in page.locator("h1").inner_text()
    assert page.locator("button:has-text('Cancel this run')").count() == 0
    shoot(page, shots, f"run-canceled-{viewport['width']}")
    assert db.execute("SELECT status FROM job_runs WHERE job_id = %s", (queued,)).fetchone() == (
        "CANCELED",
    )
    page.context.close()


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280x800", "390x844"])
def test_an_operator_cancels_every_queued_run_of_a_search_after_a_dry_run(
    chromium: Any, console: Served, db: Any, shots: Path, viewport: dict[str, int]
) -> None:
    org = uuid.uuid4()
    queued = [
        insert_run(db, org_id=org, status="QUEUED", attempt=0, request_id=f"bulk-{org}")
        for _ in range(3)
    ]
    page = runs_of_request(signed_in(chromium, console, viewport), f"bulk-{org}")
    page.click("button:has-text('Cancel the cancelable runs of this search')")
    page.wait_for_selector("[data-test=dry-run]")
    assert "Dry run: 3" in page.locator("[data-test=dry-run]").inner_text()
    shoot(page, shots, f"bulk-cancel-dry-run-{viewport['width']}")
    page.click("button:has-text('Cancel 3 run(s)')")
    page.wait_for_selector("text=canceled 3 of 3")
    assert page.locator("td[data-label=status]").all_inner_texts() == ["CANCELED"] * 3
    rows = db.execute("SELECT status FROM job_runs WHERE job_id = ANY(%s)", (queued,)).fetchall()
    assert rows == [("CANCELED",)] * 3
    page.context.close()


def test_without_auth_or_without_the_csrf_token_the_browser_is_refused(
    chromium: Any, console: Served, db: Any, shots: Path
) -> None:
    org = uuid.uuid4()
    dead = dead_echo(db, org)
    context = chromium.new_context(viewport=WIDE, base_url=console.url)
    page = context.new_page()
    for path in ("/", "/runs", f"/runs/{dead}", "/dead"):
        answer = page.goto(path)
        assert answer.status == 401 and dead not in page.content()
    shoot(page, shots, "login-1280")
    answer = page.request.post("/dead/replay", form={"job_id": dead})
    assert answer.status == 401

    page = signed_in(chromium, console, WIDE)
    # Signed in, but a POST without the page's CSRF token (as another site's form would send).
    answer = page.request.post("/dead/replay", form={"job_id": dead})
    assert answer.status == 403 and "CSRF" in answer.text()
    # ... and with a forged token, through the page's own form.
    page.goto(f"/runs/{dead}")
    page.eval_on_selector("form.actions input[name=csrf]", "el => el.value = 'forged'")
    page.click("text=Replay this run")
    assert page.locator("h1").inner_text() == "missing or invalid CSRF token"
    assert db.execute("SELECT status FROM job_runs WHERE job_id = %s", (dead,)).fetchone() == (
        "DEAD",
    )
    context.close()


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280x800", "390x844"])
def test_every_page_reads_at_its_width(
    chromium: Any, console: Served, db: Any, shots: Path, viewport: dict[str, int]
) -> None:
    """No page scrolls sideways as a whole (wide tables scroll inside their card), and each is
    saved as a screenshot."""
    data = seed(db)
    page = signed_in(chromium, console, viewport)
    width = viewport["width"]
    for path in ("/", "/runs", f"/runs/{data['secret']}", "/dead", "/outbox", "/tenants",
                 "/chain", "/audit", "/charts", "/charts?range=day", "/nodes"):  # fmt: skip
        answer = page.goto(path)
        assert answer.status == 200, path
        overflow = page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width, f"{path} is {overflow} px wide at {width} px"
        name = {"/": "overview", f"/runs/{data['secret']}": "run",
                "/charts?range=day": "charts-day"}.get(path, path.strip("/"))  # fmt: skip
        page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)
    page.context.close()
