"""The one way a process opens Redis: REDIS_URL, or the master that Redis Sentinels name.

With `REDIS_SENTINELS` set, the client asks the Sentinels for the master of
`REDIS_SENTINEL_MASTER` and asks again whenever a connection to it fails: after a failover the
next command reaches the promoted replica, with no restart. REDIS_URL still gives what the
master connections use (password, username, db, `rediss://` and its `ssl_*` query options);
only its host and port are replaced. The Sentinels' own credentials and TLS are separate
settings (a Sentinel's `requirepass` is not the master's).

Producers, workers, the scheduler and the CLI get their client here through `build_broker`
(`shared/broker/`); the others (`fleet status` ...) call `client` directly. A queue on a Redis
of its own (`REDIS_QUEUE_URLS`) gets its client through `shared/queue_servers.py`.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.connection import parse_url

from .config import Settings

#: The options of every fleet client (a worker's fetch and heartbeat, a producer's enqueue).
OPTIONS: dict[str, Any] = {
    "socket_connect_timeout": 2,
    "socket_timeout": 10,
    "socket_keepalive": True,
    "health_check_interval": 15,
    "retry_on_timeout": True,
}


def sentinel_addresses(spec: str) -> list[tuple[str, int]]:
    """`"h1:26379, h2:26380"` -> [("h1", 26379), ("h2", 26380)]; `[v6]:port` accepted."""
    addresses = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"REDIS_SENTINELS: {item!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def master_options(url: str) -> dict[str, Any]:
    """REDIS_URL without its host and port: what the connections to the master use."""
    options = dict(parse_url(url))  # type: ignore[no-untyped-call]
    options.pop("host", None)
    options.pop("port", None)
    options.pop("path", None)
    if options.pop("connection_class", None) is redis.SSLConnection:
        options["ssl"] = True  # Sentinel picks its TLS connection class from this flag
    return options


def client(
    settings: Settings, *, url: str | None = None, master: str | None = None, **overrides: Any
) -> redis.Redis:
    """A Redis client for this process's settings; `overrides` change `OPTIONS` (timeouts).
    `url` / `master`: another server than REDIS_URL / REDIS_SENTINEL_MASTER (a queue's own,
    `shared/queue_servers.py`)."""
    options = {**OPTIONS, **overrides}
    url = url or settings.redis_url
    if not settings.redis_sentinels:
        return redis.Redis.from_url(url, **options)
    from redis.sentinel import Sentinel

    own: dict[str, Any] = {
        "socket_connect_timeout": options["socket_connect_timeout"],
        "socket_timeout": min(float(options["socket_timeout"]), 2.0),
    }
    if settings.redis_sentinel_username:
        own["username"] = settings.redis_sentinel_username
    if settings.redis_sentinel_password is not None:
        own["password"] = settings.redis_sentinel_password.get_secret_value()
    if settings.redis_sentinel_tls:
        own["ssl"] = True
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        sentinel_addresses(settings.redis_sentinels), sentinel_kwargs=own
    )
    found: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        master or settings.redis_sentinel_master,
        redis_class=redis.Redis,
        **{**master_options(url), **options},
    )
    return found
