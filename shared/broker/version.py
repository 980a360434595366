"""The Dramatiq minor version this package was written against, and the guard that refuses any
other at import.

`shared/broker/` relies on parts of Dramatiq that are not its public API, which a minor release
may change without notice:

- `dramatiq.brokers.redis._RedisConsumer`: `FleetRedisConsumer` subclasses it and uses its
  `message_cache`, `queued_message_ids`, `misses` and `outstanding_message_count`
  (`consumer.py`);
- `RedisBroker.scripts["dispatch"]` (`dramatiq/brokers/redis/dispatch.lua`): its arguments
  (command, timestamp, queue, worker id, heartbeat timeout, dead-message TTL, maintenance flag,
  unpack size, command arguments); its `ack` command, which `lua/ack_many.lua` re-implements
  for many messages at once (`acker.py`), and its `fetch` command, which `lua/fetch.lua`
  re-implements;
- `RedisBroker._should_do_maintenance`, `_max_unpack_size`, `_dispatch(command)` and the
  `do_<command>` methods of its `__getattr__` (`redis.py`, `consumer.py`); `redis.py` overrides
  `do_enqueue` (called by `RedisBroker.enqueue` with the queue, the Redis id and the data),
  `do_ack`, `do_nack`, `do_requeue` and `do_qsize` (the concurrency slots: `lanes.py`), and
  relies on the dispatch script's maintenance and requeue pushing to `<queue>` (the default
  lane);
- `MessageProxy._message` and `_exception`, and proxies taking attributes of their own
  (`delivery.py`);
- `dramatiq.worker.ConsumerThread` dropping the delayed messages it holds on a connection
  error and catching only `BrokerConnectionError` as it closes (`consumer.py`: `_recover`,
  `requeue`);
- its Redis key layout (`<ns>:<queue>`, `<queue>.msgs`, `<queue>.DQ`, `__acks__.<worker>.<queue>`,
  `__heartbeats__`), which `lua/fetch.lua`, `lua/ack_many.lua` and `lua/enqueue_once.lua`
  read and write.

`tests/unit/test_broker_guard.py` names each of them. To move to another minor: read that
version's `dramatiq/brokers/redis.py` and `dispatch.lua` against the list above, install it,
run that test and the integration tests, then change `SUPPORTED_DRAMATIQ`, the pin in
pyproject.toml and requirements.lock (`make lock`) together.
"""

from __future__ import annotations

import dramatiq

from ..errors import UnsupportedDramatiq

#: The Dramatiq minor version `shared/broker/` was written against (pyproject.toml pins it).
SUPPORTED_DRAMATIQ = "2.2"
#: What to review before raising `SUPPORTED_DRAMATIQ`.
REVIEW = (
    "shared/broker/consumer.py (FleetRedisConsumer subclasses _RedisConsumer)",
    "shared/broker/lua/ack_many.lua (the dispatch script's ack command, for many messages)",
    "shared/broker/redis.py (overrides RedisBroker._should_do_maintenance)",
    "shared/broker/lua/fetch.lua, ack_many.lua and enqueue_once.lua (Dramatiq's Redis layout)",
    "shared/broker/redis.py (overrides do_enqueue, do_ack, do_nack, do_requeue, do_qsize)",
)


def minor(version: str) -> str:
    """`"2.2.1"` -> `"2.2"`."""
    return ".".join(version.split(".")[:2])


def check_dramatiq_version(installed: str, supported: str = SUPPORTED_DRAMATIQ) -> None:
    """Raise `UnsupportedDramatiq` unless `installed` is a release of the `supported` minor."""
    if minor(installed) == supported:
        return
    raise UnsupportedDramatiq(
        f"dramatiq {installed} is installed, but shared/broker/ was written against dramatiq "
        f"{supported}.x and relies on its private internals (dramatiq.brokers.redis."
        f"_RedisConsumer, the Redis dispatch script's commands and key layout). Install the "
        f"pinned version (pip install -r requirements.lock), or review {'; '.join(REVIEW)} "
        f"against dramatiq {installed}, then raise SUPPORTED_DRAMATIQ in "
        f"shared/broker/version.py."
    )


check_dramatiq_version(dramatiq.__version__)
