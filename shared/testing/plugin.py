"""The pytest plugin a product enables in its own conftest, for example:

    pytest_plugins = ["shared.testing.plugin"]

    def test_checkout_sends_the_invoice(client, jobfleet):
        client.post("/checkout", json={...})
        job = jobfleet.assert_sent(catalog.INVOICE_SEND, template_key="receipt")
        jobfleet.drain({catalog.INVOICE_SEND: fake_send})

The `jobfleet` fixture captures every send of the test (see `shared.testing.capture`); nothing
reaches Redis or Postgres.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .capture import JobCapture


@pytest.fixture
def jobfleet() -> Iterator[JobCapture]:
    """Sends of this test, captured: `assert_sent`, `assert_not_sent`, `sent_jobs`, `drain`."""
    capture = JobCapture()
    with capture.installed():
        yield capture
