"""REDIS_SENTINELS settings reach the client: the master's credentials, db and TLS come from
REDIS_URL, the Sentinels' own from their settings (nothing connects here: clients are lazy)."""

from __future__ import annotations

import pytest
import redis
from pydantic import SecretStr
from redis.sentinel import SentinelConnectionPool, SentinelManagedSSLConnection

from shared.config import Settings
from shared.redis_conn import client, sentinel_addresses


def test_sentinel_addresses_parse_and_refuse_what_is_not_host_port() -> None:
    assert sentinel_addresses(" a:26379, [::1]:26380,") == [("a", 26379), ("::1", 26380)]
    with pytest.raises(ValueError, match="host:port"):
        sentinel_addresses("a:26379,b")


def test_without_sentinels_the_url_is_used_as_it_is() -> None:
    c = client(Settings(redis_url="redis://:pw@127.0.0.1:6390/3"))
    kwargs = c.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"], kwargs["password"]) == (
        "127.0.0.1",
        6390,
        3,
        "pw",
    )


def test_with_sentinels_the_master_keeps_the_urls_auth_db_and_tls_options() -> None:
    settings = Settings(
        redis_url="rediss://fleet:pw@ignored:1/2?ssl_cert_reqs=none",
        redis_sentinels="127.0.0.1:26379,127.0.0.1:26380",
        redis_sentinel_master="fleet-master",
        redis_sentinel_password=SecretStr("sentinel-pw"),
        redis_sentinel_tls=True,
    )
    c = client(settings, socket_timeout=3)
    pool = c.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "fleet-master"
    assert pool.connection_class is SentinelManagedSSLConnection
    kwargs = pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("fleet", "pw", 2)
    assert kwargs["ssl_cert_reqs"] == "none" and kwargs["socket_timeout"] == 3
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [26379, 26380]
    own = sentinels[0].connection_pool.connection_kwargs
    assert own["password"] == "sentinel-pw"
    assert issubclass(sentinels[0].connection_pool.connection_class, redis.SSLConnection)
