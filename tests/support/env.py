"""Per-session isolation on the shared services: a fresh database and a Redis key namespace.

Several test sessions (developers, helpers, CI) may share one Postgres and one Redis: each
session gets its own database `jobfleet_test_<hex>` (dropped at the end) and broker namespace.
"""

from __future__ import annotations

import os
import uuid

from shared.launcher.net import free_port
from tests.support.services import DEFAULT_POSTGRES, DEFAULT_REDIS

SESSION = uuid.uuid4().hex[:8]
# A fleet a test launches starts its SMTP sink and EVM node here, not on the defaults (2525,
# 8545), which the fleets of parallel sessions would share (one would use the other's).
SMTP_PORT = free_port()
CHAIN_PORT = next(port for port in iter(free_port, 0) if port != SMTP_PORT)
# Resolved by the root conftest (tests/support/services.py) before this module is imported.
BASE_PG = os.environ.get("TEST_POSTGRES_URL", DEFAULT_POSTGRES)
REDIS_URL = os.environ.get("TEST_REDIS_URL", DEFAULT_REDIS)


def test_env() -> dict[str, str]:
    """Environment of this session's processes (in-process settings and spawned workers)."""
    # (Not a test, although its name starts with `test_`: see `__test__` below.)
    return {
        "DATABASE_URL": f"{BASE_PG}/jobfleet_test_{SESSION}",
        "REDIS_URL": REDIS_URL,
        "BROKER_NAMESPACE": f"jftest-{SESSION}",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "INFO",
        "LOG_COMPLETED_RUNS": "true",  # tests read the run.finished lines
        "SMTP_PORT": str(SMTP_PORT),
        "CHAIN_RPC_URL": f"http://127.0.0.1:{CHAIN_PORT}",
        "HEARTBEAT_TIMEOUT_MS": "3000",
        "HEARTBEAT_INTERVAL_MS": "500",
        "RETRIES": '{"testq": {"max_attempts": 3, "min_backoff_ms": 100, "max_backoff_ms": 1000}}',
    }


test_env.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test to collect
