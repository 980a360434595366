"""A relay that refuses the fleet's credentials or TLS setting is an outage of the relay, not the
recipient's fault (issue 31).

Before: a wrong SMTP password (`535 5.7.8`) or a relay that requires STARTTLS while the fleet
speaks plain SMTP (`530 Must issue a STARTTLS command first`) dead-lettered every email at
attempt 1 with "SMTP refused anna@... at connect". Now each is deferred within the outage window
like an unreachable relay, logged `email.relay_fault`, counted in
`jobfleet_email_relay_faults_total`, and its error names the cause. Against aiosmtpd servers
(the real SMTP server the dev sink is built on) requiring AUTH or STARTTLS.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from prometheus_client import REGISTRY
from pydantic import SecretStr

from shared.config import Settings
from shared.jobs import catalog
from shared.runtime import Runtime
from tests.support.wait import wait_for
from tests.workers.email.conftest import free_port
from tests.workers.email.helpers import row, schedule, unique, wait_run
from workers.email import console as email_console
from workers.email import status as email_status


class _Accept:
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        return "250 OK"


def _only(password: str) -> Any:
    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, auth: Any) -> Any:
        ok = getattr(auth, "password", b"") == password.encode()
        return AuthResult(success=ok, handled=False)

    return authenticator


@pytest.fixture
def relay() -> Iterator[Any]:
    started: list[Controller] = []

    def start(**kwargs: Any) -> int:
        port = free_port()
        controller = Controller(_Accept(), hostname="127.0.0.1", port=port, **kwargs)
        controller.start()
        started.append(controller)
        return port

    yield start
    for controller in started:
        controller.stop()


def _faults(cause: str) -> float:
    return REGISTRY.get_sample_value("jobfleet_email_relay_faults_total", {"cause": cause}) or 0.0


@pytest.mark.parametrize(
    ("server", "worker", "cause", "said"),
    [
        (
            {"authenticator": _only("right"), "auth_require_tls": False, "auth_required": True},
            {"smtp_username": "fleet", "smtp_password": SecretStr("wrong")},
            "SMTP_AUTH_FAILED",
            "refused our credentials",
        ),
        (
            {"require_starttls": True, "tls_context": ssl.create_default_context()},
            {},
            "SMTP_TLS_MISMATCH",
            "requires STARTTLS",
        ),
        (
            {"authenticator": _only("right"), "auth_require_tls": False, "auth_required": True},
            {},
            "SMTP_AUTH_REQUIRED",
            "requires authentication",
        ),
    ],
    ids=["wrong-password-535", "starttls-required-530", "auth-required-530"],
)
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_a_relay_refusing_the_fleets_configuration_defers_and_names_the_cause(
    make_email_worker,
    relay,
    db,
    runtime: Runtime,
    settings: Settings,
    server: dict[str, Any],
    worker: dict[str, Any],
    cause: str,
    said: str,
) -> None:
    port = relay(**server)
    make_email_worker(port, **worker)
    before = _faults(cause)
    recipient = unique("anna")
    email = schedule(db, recipient)
    catalog.EMAIL_SEND.send(email.payload())

    deferred = wait_for(
        lambda: (r := row(db, email.id)).get("deferrals", 0) >= 1 and r, what="a deferral"
    )
    assert deferred["status"] == "QUEUED" and deferred["error_code"] == cause, deferred
    assert said in deferred["error"] and recipient not in deferred["error"]
    run = wait_run(email, "QUEUED")
    assert run.attempt == 1  # not spent: the email is not at fault
    assert _faults(cause) > before

    # `fleet status` and the console's Overview show the emails the fault holds, in red.
    report = email_status.sections(settings, None)
    [fault] = report["email"]["relay_faults"]["faults"]
    assert (fault["code"], fault["emails"]) == (cause, 1) and said in fault["error"]
    panel = email_console.overview_panel(runtime, [])
    assert panel is not None and panel[0] == "email/relay_faults.html"
