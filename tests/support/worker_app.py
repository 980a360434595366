"""A worker process for tests: `dramatiq tests.support.worker_app` with the session's env.

It consumes `testq` (the test jobs), or the queue JOBFLEET_TEST_QUEUE names: `testq-b`, the second
test queue, which a test may put on a Redis server of its own (REDIS_QUEUE_URLS)."""

import os

from shared.bootstrap import boot_worker
from tests.support.jobs import bind, bind_b, bind_crash

QUEUE = os.environ.get("JOBFLEET_TEST_QUEUE", "testq")
broker = boot_worker("test", queues=[QUEUE])
if QUEUE == "testq-b":
    jobs = bind_b(broker)
else:
    jobs = bind(broker)
    crash = bind_crash(broker)
