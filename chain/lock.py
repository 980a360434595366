"""One transaction at a time per signer, across every process: a Redis lock per address.

`SET key token NX PX ttl` to take it, a Lua compare-and-delete to release it and a Lua
compare-and-expire to renew it (a holder whose lock expired cannot release or extend someone
else's). A holder renews it while it waits for a receipt; a holder that dies lets it expire
after the TTL, and the next holder reconciles the dead one's journaled transaction.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .errors import SignerBusy

_RELEASE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end"
)
_RENEW = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) "
    "else return 0 end"
)


def signer_lock_prefix(namespace: str) -> str:
    """Signer locks live under the fleet's broker namespace, like its queues: two fleets on one
    Redis (staging and production, two test sessions) never share or clear each other's."""
    return f"{namespace}:chain:signer-lock"


class LockLost(Exception):
    """The lock expired while held (the holder stalled past its TTL)."""


class HeldLock:
    def __init__(
        self, client: Any, key: str, token: str, ttl_ms: int, clock: Callable[[], float]
    ) -> None:
        self.client = client
        self.key = key
        self.token = token
        self.ttl_ms = ttl_ms
        self._clock = clock
        self._renewed = clock()

    def renew(self, *, force: bool = False) -> None:
        """Extend the TTL (at most every third of it unless forced); raises `LockLost`."""
        now = self._clock()
        if not force and (now - self._renewed) * 1000 < self.ttl_ms / 3:
            return
        if not self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms):
            raise LockLost(self.key)
        self._renewed = now

    def release(self) -> None:
        self.client.eval(_RELEASE, 1, self.key, self.token)


class SignerLocks:
    """Factory of per-signer locks: `with locks.hold(address) as lock: ...`."""

    def __init__(
        self,
        client: Any,
        *,
        chain_id: int,
        ttl_ms: int,
        wait_ms: int,
        prefix: str = "chain:signer-lock",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.chain_id = chain_id
        self.ttl_ms = ttl_ms
        self.wait_ms = wait_ms
        self.prefix = prefix
        self._clock = clock
        self._sleep = sleep

    def key(self, address: str) -> str:
        return f"{self.prefix}:{self.chain_id}:{address.lower()}"

    @contextmanager
    def hold(self, address: str) -> Iterator[HeldLock]:
        key = self.key(address)
        token = secrets.token_hex(16)
        deadline = self._clock() + self.wait_ms / 1000
        delay = 0.005
        while not self.client.set(key, token, nx=True, px=self.ttl_ms):
            if self._clock() >= deadline:
                raise SignerBusy(
                    f"signer {address} busy for {self.wait_ms} ms",
                    delay_ms=max(200, self.wait_ms // 4),
                )
            self._sleep(delay)
            delay = min(delay * 2, 0.02)  # a hot signer frees often: poll briskly
        lock = HeldLock(self.client, key, token, self.ttl_ms, self._clock)
        try:
            yield lock
        finally:
            # Redis gone: the TTL frees the lock anyway.
            with contextlib.suppress(Exception):
                lock.release()
