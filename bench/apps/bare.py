"""The stock Dramatiq worker of the benchmark: `dramatiq bench.apps.bare`.

A `RedisBroker` as Dramatiq builds it (its default middleware, nothing added or removed) and
one no-op actor. Redis URL and namespace come from the environment the benchmark sets.
"""

import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.jobs import declare_bare

broker = RedisBroker(  # type: ignore[no-untyped-call]
    url=os.environ["REDIS_URL"], namespace=os.environ["BROKER_NAMESPACE"]
)
dramatiq.set_broker(broker)
noop = declare_bare(broker, os.environ["BROKER_NAMESPACE"])
