"""DESIGN §8: secrets in payloads are redacted at every log level (the views: test_cli.py).

Before: at LOG_LEVEL=DEBUG, Dramatiq's per-actor logger printed "Received args=(...)" with the
whole payload, values under `token` included.
"""

from __future__ import annotations

import uuid

from shared.runtime import Runtime
from tests.support.jobs import raw_message
from tests.support.procs import Procs
from tests.support.wait import wait_run


def test_a_planted_secret_reaches_no_log_line_even_at_debug(runtime: Runtime, procs: Procs) -> None:
    secret = f"planted-{uuid.uuid4().hex}"
    worker = procs.worker(env={"LOG_LEVEL": "DEBUG"})
    payload = {
        "v": 2,
        "org_id": str(uuid.uuid4()),
        "entity_id": str(uuid.uuid4()),
        "message": "hello",
        "token": secret,  # not in the contract: the run dies INVALID_PAYLOAD, after logging
        "nested": [{"api_key": secret}],
    }
    message = raw_message("test:echo", payload)
    runtime.broker.enqueue(message)
    wait_run(f"raw:test:echo:{message.message_id}", "DEAD")

    log = worker.log()
    assert '"level": "debug"' in log and "Received" in log  # DEBUG lines were written
    assert secret not in log
