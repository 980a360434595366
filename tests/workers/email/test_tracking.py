"""Open and click tracking (issue 22): opt-in per template, none for an org that turned it off;
a 1x1 pixel and links through a signed redirect that leads only to URLs of the rendered email;
the first open and each click recorded with time and user agent; counts in `fleet email
feedback` and jobfleet_email_feedback_total. Messages through a real Postfix."""

from __future__ import annotations

import email
import email.policy
import html
import re
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY
from typer.testing import CliRunner

from examples.product_api.app import create_app
from shared.jobs import catalog
from tests.support.wait import wait_for
from tests.workers.email.helpers import schedule, unique, wait_row
from workers.email import cli
from workers.email.feedback import tracking

QUOTE_URL = "https://example.com/q/7?a=1&b=2"
VARS = {"NAME": "Ada", "QUOTE_REF": "Q-7", "QUOTE_URL": QUOTE_URL, "EXPIRES_ON": "2026-12-31"}


@pytest.fixture
def api(runtime) -> Any:  # type: ignore[no-untyped-def]
    with TestClient(create_app(runtime=lambda: runtime), follow_redirects=False) as client:
        yield client


def _html(postfix, message_id: str) -> str:  # type: ignore[no-untyped-def]
    copies = wait_for(lambda: postfix.delivered(message_id), what=f"{message_id} delivered")
    msg = email.message_from_bytes(copies[0].read_bytes(), policy=email.policy.default)
    return msg.get_body(("html",)).get_content()  # type: ignore[union-attr,no-any-return]


def _send(db, postfix, org: uuid.UUID | None = None, template: str = "quote-reminder"):  # type: ignore[no-untyped-def]
    sent = schedule(db, unique("reader"), org=org, template=template, variables=VARS)
    catalog.EMAIL_SEND.send(sent.payload())
    return sent, _html(postfix, wait_row(db, sent.id, "SENT")["message_id"])


def _metric(event: str) -> float:
    return REGISTRY.get_sample_value("jobfleet_email_feedback_total", {"event": event}) or 0.0


def _events(db, email_id: uuid.UUID) -> list[tuple[Any, ...]]:  # type: ignore[no-untyped-def]
    return db.execute(
        "SELECT kind, url, user_agent FROM email_events WHERE email_id = %s ORDER BY id",
        (email_id,),
    ).fetchall()


def test_opens_and_clicks_of_a_tracked_template_are_recorded(
    make_email_worker, postfix, db, api
) -> None:
    make_email_worker(postfix.port, tracked_templates=["quote-reminder"])
    sent, body = _send(db, postfix)

    assert f'href="{html.escape(QUOTE_URL)}"' not in body  # the link goes through us now
    pixel = re.findall(r'<img src="([^"]+/o/[^"]+\.gif)" width="1" height="1"', body)
    links = [html.unescape(h) for h in re.findall(r'href="([^"]+/c/[^"]+)"', body)]
    assert len(pixel) == 1 and len(links) == 1
    opens, clicks = _metric("open"), _metric("click")

    for agent in ("Mail/1.0", "Mail/2.0"):  # only the first open is recorded
        got = api.get(urlsplit(pixel[0]).path, headers={"User-Agent": agent})
        assert got.status_code == 200 and got.headers["content-type"] == "image/gif"
        assert got.content == tracking.PIXEL
    link = urlsplit(links[0])
    for agent in ("Browser/1", "Browser/2"):  # every click is
        got = api.get(f"{link.path}?{link.query}", headers={"User-Agent": agent})
        assert got.status_code == 302 and got.headers["location"] == QUOTE_URL

    assert _events(db, sent.id) == [
        ("open", None, "Mail/1.0"),
        ("click", QUOTE_URL, "Browser/1"),
        ("click", QUOTE_URL, "Browser/2"),
    ]
    assert (_metric("open") - opens, _metric("click") - clicks) == (1, 2)
    assert tracking.counts(db, sent.org_id) == {"opened": 1, "clicks": 2, "clicked": 1}
    shown = CliRunner().invoke(cli.app, ["feedback", "--org", str(sent.org_id)])
    assert shown.exit_code == 0, shown.output
    assert "opened 1  clicks 2 (emails clicked 1)" in shown.output


def test_the_redirect_leads_only_to_urls_of_the_email(make_email_worker, postfix, db, api) -> None:
    make_email_worker(postfix.port, tracked_templates=["quote-reminder"])
    sent, body = _send(db, postfix)
    link = urlsplit(html.unescape(re.findall(r'href="([^"]+/c/[^"]+)"', body)[0]))
    token, mac = link.path.split("/")[-2:]

    for forged in (
        f"{link.path}?u=https://evil.example/",  # the email's token and mac, another URL
        f"/email/c/{token}/{'A' * 22}?u=https://evil.example/",  # a made-up mac
        f"/email/c/not-a-token/{mac}?{link.query}",
    ):
        answer = api.get(forged)
        assert answer.status_code == 400 and "location" not in answer.headers, forged
    assert _events(db, sent.id) == []


def test_no_tracking_for_templates_not_opted_in_nor_for_an_org_that_turned_it_off(
    make_email_worker, postfix, db
) -> None:
    make_email_worker(postfix.port, tracked_templates=["quote-reminder"])
    org = uuid.uuid4()
    tracking.set_org_tracking(db, org, False, datetime.now(UTC))

    _, off = _send(db, postfix, org=org)  # a tracked template, but the org said no
    _, other = _send(db, postfix, template="welcome")  # not opted in
    _, tracked = _send(db, postfix)  # the control: tracked
    for body in (off, other):
        assert "/o/" not in body and "/c/" not in body
    assert f'href="{html.escape(QUOTE_URL)}"' in off
    assert "/o/" in tracked and "/c/" in tracked
