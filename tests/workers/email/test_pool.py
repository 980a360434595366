"""SMTP connection reuse (issue 16): a per-process pool with a per-host limit, reused across
jobs and safe with partial failures. Against a real Postfix (and the aiosmtpd test server for
a server that goes away)."""

from __future__ import annotations

import ctypes
import threading
import time
import uuid

import pytest
from dramatiq.middleware.time_limit import TimeLimitExceeded

from shared.jobs import catalog
from tests.support.wait import wait_for
from tests.workers.email.conftest import SmtpServer, free_port
from tests.workers.email.helpers import row, schedule, unique, wait_row, wait_run
from workers.email.pool import SmtpPool
from workers.email.smtp import SmtpConfig


def _send_all(db, addresses, **fields):  # type: ignore[no-untyped-def]
    emails = [schedule(db, a, **fields) for a in addresses]
    for email in emails:
        catalog.EMAIL_SEND.send(email.payload())
    return emails


def test_connections_are_reused_across_jobs(make_email_worker, postfix, db) -> None:
    make_email_worker(postfix.port, threads=4, smtp_pool_size=2)
    before = postfix.connections()

    emails = _send_all(db, [unique("reuse") for _ in range(20)])

    for email in emails:
        wait_row(db, email.id, "SENT", timeout=30)
    assert postfix.connections() - before <= 2


def test_a_relay_limiting_concurrent_connections_refuses_none(
    make_email_worker, postfix, db
) -> None:
    # Given a listener that answers 421 to a client's third concurrent connection
    make_email_worker(postfix.limited_port, threads=8, smtp_pool_size=postfix.connection_limit)
    refused_before = postfix.log().count("too many connections")

    emails = _send_all(db, [unique("busy") for _ in range(30)])

    sent = [wait_row(db, email.id, "SENT", timeout=60) for email in emails]
    assert [s["deferrals"] for s in sent] == [0] * len(sent)
    assert postfix.log().count("too many connections") == refused_before


def test_refusals_leave_the_connection_usable_for_the_next_email(
    make_email_worker, postfix, db
) -> None:
    make_email_worker(postfix.port, threads=1, smtp_pool_size=1)
    warm = _send_all(db, [unique("warm")])[0]
    wait_row(db, warm.id, "SENT")
    before = postfix.connections()

    # A 550 to RCPT, a 550 to DATA (header_checks), then a good one, on one connection
    [bounced] = _send_all(db, [unique("reject")])
    assert wait_run(bounced, "DEAD").error_code == "SMTP_550"
    [refused] = _send_all(db, [unique("content")], template="welcome",
                          variables={"NAME": "reject-at-data"})  # fmt: skip
    assert wait_run(refused, "DEAD").error_code == "SMTP_550"
    assert row(db, refused.id)["error"].startswith("550 5.7.1")
    [good] = _send_all(db, [unique("after")])
    sent = wait_row(db, good.id, "SENT")

    assert len(wait_for(lambda: postfix.delivered(sent["message_id"]))) == 1
    assert postfix.connections() == before  # all three on the pooled connection


def test_a_pooled_connection_the_server_closed_is_replaced_without_a_deferral(
    make_email_worker, db, tmp_path
) -> None:
    port = free_port()
    server = SmtpServer(tmp_path / "one", port=port).start()
    make_email_worker(port, threads=1, smtp_pool_size=1)
    first = _send_all(db, [unique("before")])[0]
    wait_row(db, first.id, "SENT")
    server.stop()  # the pooled connection dies with it
    server = SmtpServer(tmp_path / "two", port=port).start()
    try:
        second = _send_all(db, [unique("after")])[0]
        sent = wait_row(db, second.id, "SENT")
        assert sent["deferrals"] == 0 and sent["attempts"] == 1
        assert len(server.messages(sent["message_id"])) == 1
    finally:
        server.stop()


def _pool_send(pool, config, to: str, before_data=lambda: None):  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from workers.email.message import build_message, serialize
    from workers.email.templates import Rendered

    message, envelope = build_message(
        Rendered(subject="Hi", text="text", html="<p>html</p>"),
        message_id=f"<{uuid.uuid4().hex}@test.jobfleet>",
        from_header="jobfleet <no-reply@test.jobfleet>",
        to=to,
        date=datetime.now(UTC),
        lang="en",
    )
    return pool.send(config, serialize(message, envelope), envelope, before_data=before_data)


def test_a_claim_that_fails_before_data_returns_the_connection_after_rset(smtp_server) -> None:
    pool = SmtpPool(per_host=1)
    config = SmtpConfig(host="127.0.0.1", port=smtp_server.port, timeout_s=5)
    try:

        def lost_race() -> None:
            raise RuntimeError("claimed by another delivery")

        with pytest.raises(RuntimeError):
            _pool_send(pool, config, unique("raced"), before_data=lost_race)
        accepted = _pool_send(pool, config, unique("next"))

        assert accepted.reply.startswith("250") and pool.stats() == {"opened": 1, "idle": 1}
    finally:
        pool.close()


def test_a_worker_thread_interrupted_while_waiting_for_a_connection_leaks_no_slot(
    smtp_server,
) -> None:
    # Given a one-connection pool busy with a slow email, and a second email waiting for it
    pool = SmtpPool(per_host=1)
    config = SmtpConfig(host="127.0.0.1", port=smtp_server.port, timeout_s=2)
    outcomes: dict[str, BaseException] = {}

    def send(name: str) -> None:
        try:
            _pool_send(pool, config, unique(name))
        except BaseException as exc:
            outcomes[name] = exc

    slow = threading.Thread(target=send, args=("slow",))
    waiting = threading.Thread(target=send, args=("waiting",))
    slow.start()
    wait_for(lambda: pool.stats()["opened"] == 1, what="the slow send connected")
    waiting.start()
    try:
        time.sleep(0.3)
        # When a time limit interrupts the waiting thread (how dramatiq's TimeLimit does it:
        # the exception surfaces once the connection is handed over)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(waiting.ident or 0), ctypes.py_object(TimeoutError)
        )
        slow.join(15)
        waiting.join(15)
        assert isinstance(outcomes.get("waiting"), TimeoutError)
        # Then the connection it was handed goes back: the next email gets it
        assert _pool_send(pool, config, unique("next")).reply.startswith("250")
    finally:
        slow.join(15)
        waiting.join(15)
        pool.close()


def test_a_worker_thread_interrupted_during_its_transaction_closes_that_connection(
    smtp_server,
) -> None:
    # Given a send waiting for the 250 to DATA (the server holds it back for slow*@)
    pool = SmtpPool(per_host=1)
    config = SmtpConfig(host="127.0.0.1", port=smtp_server.port, timeout_s=10)
    outcomes: dict[str, BaseException] = {}

    def send() -> None:
        try:
            _pool_send(pool, config, unique("slow"))
        except BaseException as exc:
            outcomes["slow"] = exc

    slow = threading.Thread(target=send)
    slow.start()
    try:
        wait_for(lambda: pool.stats()["opened"] == 1, what="the slow send connected")
        time.sleep(0.5)
        # When dramatiq's time limit interrupts it (surfacing once the blocking read returns)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(slow.ident or 0), ctypes.py_object(TimeLimitExceeded)
        )
        slow.join(15)
        assert isinstance(outcomes.get("slow"), TimeLimitExceeded)
        # Then its connection, in an unknown state, is closed, not pooled; the slot is free
        assert pool.stats() == {"opened": 1, "idle": 0}
        assert _pool_send(pool, config, unique("next")).reply.startswith("250")
        assert pool.stats() == {"opened": 2, "idle": 1}
    finally:
        slow.join(15)
        pool.close()


def test_one_pooled_connection_carries_the_emails_of_many_threads(smtp_server) -> None:
    pool = SmtpPool(per_host=2)
    config = SmtpConfig(host="127.0.0.1", port=smtp_server.port, timeout_s=5)
    replies: list[str] = []

    def sender() -> None:
        for _ in range(5):
            replies.append(_pool_send(pool, config, unique("many")).reply)

    threads = [threading.Thread(target=sender) for _ in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(replies) == 30 and all(r.startswith("250") for r in replies)
        assert pool.stats()["opened"] <= 2
    finally:
        pool.close()


def test_content_with_bare_line_feeds_goes_out_with_crlf() -> None:
    from workers.email.smtp import _crlf

    crlf = b"Subject: a\r\n\r\nline\r\n"
    assert _crlf(crlf) is crlf  # what the serializer writes: sent as is
    assert _crlf(b"Subject: a\n\nline\rnext\r\n") == b"Subject: a\r\n\r\nline\r\nnext\r\n"
