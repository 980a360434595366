"""A worker process for tests: `dramatiq tests.support.worker_app` with the session's env."""

from shared.bootstrap import boot_worker
from tests.support.jobs import bind, bind_crash

broker = boot_worker("test")
jobs = bind(broker)
crash = bind_crash(broker)
