"""The SMTP connections of a worker process: opened once, reused across jobs (issue 16).

One connection per email cost a TCP and SMTP handshake each time (~75 emails/s to Postfix)
and, with a relay that limits concurrent connections per client, got most of them refused.
The pool keeps at most `per_host` connections open to each server and lends them to the
worker threads one transaction at a time; a thread beyond the limit waits for one.

All SMTP I/O runs on one event loop in a thread of its own; a worker thread runs each phase of
its transaction there and waits for it, and calls `before_data` (a database write) itself, so
the loop never blocks. A connection goes back to the pool only in a known state:
- after 250 to DATA, or any reply to DATA (the transaction is over either way);
- after a refusal of MAIL or of the primary RCPT, or a `before_data` that raised, once RSET
  is answered;
- never after a network error, a timeout or a 421 (closed instead).
A pooled connection the server closed meanwhile (its idle timeout) is found at the first
command, before anything is sent, and replaced by a new one transparently. Connections idle
for longer than `idle_s` are closed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import aiosmtplib

from . import smtp
from .message import Envelope
from .smtp import Accepted, SmtpConfig, SmtpDeferred, SmtpFailure

if TYPE_CHECKING:
    from .settings import EmailSettings

T = TypeVar("T")


@dataclass
class _Host:
    slots: asyncio.Semaphore
    #: (connection, monotonic time it became idle), most recent last.
    idle: list[tuple[aiosmtplib.SMTP, float]] = field(default_factory=list)
    opened: int = 0


@dataclass
class _Lease:
    client: aiosmtplib.SMTP
    reused: bool


class SmtpPool:
    def __init__(self, *, per_host: int = 8, idle_s: float = 30.0) -> None:
        self.per_host = per_host
        self.idle_s = idle_s
        self._hosts: dict[SmtpConfig, _Host] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="smtp-pool", daemon=True
        )
        self._thread.start()
        self._closed = False

    @classmethod
    def from_settings(cls, settings: EmailSettings) -> SmtpPool:
        return cls(per_host=settings.smtp_pool_size, idle_s=settings.smtp_pool_idle_s)

    # -- from the worker threads -----------------------------------------------------------

    def send(
        self,
        config: SmtpConfig,
        content: bytes,
        envelope: Envelope,
        *,
        before_data: Callable[[], None],
    ) -> Accepted:
        """One transaction on a pooled connection (same contract as a fresh connection).
        Two hops to the pool's loop (before and after `before_data`): each hop waits for the
        GIL twice, which costs more than the SMTP round trips under load."""
        lease, refused = self._run(
            self._start(config, envelope),
            abandon=lambda r: self._checkin(config, r[0].client, False),
        )
        try:
            before_data()
        except BaseException:
            self._run(self._abort(config, lease))
            raise
        reply = self._run(self._finish(config, lease, content))
        return Accepted(reply=reply, refused=refused)

    def stats(self) -> dict[str, int]:
        """Connections opened so far and idle now, summed over the servers."""
        return self._run(self._stats())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._run(self._close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _run(
        self,
        coro: Coroutine[Any, Any, T],
        *,
        abandon: Callable[[T], Coroutine[Any, Any, None]] | None = None,
    ) -> T:
        """Run `coro` on the pool's loop and wait. Interrupted while waiting (dramatiq's time
        limit raises in this thread, but only once `result()` has returned: a lock wait is not
        interrupted), a phase that still runs is cancelled (each phase returns its connection
        when cancelled), and one that succeeded hands its result to `abandon`."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            if abandon is not None:
                future.add_done_callback(lambda f: self._abandon(f, abandon))
            future.cancel()
            raise

    def _abandon(
        self, future: Future[T], abandon: Callable[[T], Coroutine[Any, Any, None]]
    ) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        result = future.result()
        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(abandon(result)))

    # -- on the pool's loop ----------------------------------------------------------------

    def _host(self, config: SmtpConfig) -> _Host:
        host = self._hosts.get(config)
        if host is None:
            host = self._hosts[config] = _Host(slots=asyncio.Semaphore(self.per_host))
        return host

    async def _checkout(self, config: SmtpConfig) -> _Lease:
        host = self._host(config)
        wait_s = 4 * config.timeout_s  # every holder is bounded by the SMTP timeouts
        try:
            await asyncio.wait_for(host.slots.acquire(), wait_s)
        except TimeoutError:
            raise SmtpDeferred(
                f"no free connection to {config.host}:{config.port} within {wait_s:g} s "
                f"({self.per_host} in use)",
                stage="connect",
            ) from None
        now = time.monotonic()
        while host.idle:
            client, since = host.idle.pop()
            if now - since < self.idle_s and client.is_connected:
                return _Lease(client, reused=True)
            await smtp.close(client, polite=False)
        try:
            client = await smtp.connect(config)
        except BaseException:
            host.slots.release()
            raise
        host.opened += 1
        return _Lease(client, reused=False)

    async def _start(self, config: SmtpConfig, envelope: Envelope) -> tuple[_Lease, dict[str, str]]:
        """A connection and MAIL + RCPT on it; the connection is back in the pool on failure."""
        lease = await self._checkout(config)
        try:
            refused = await self._begin(config, lease, envelope)
        except SmtpFailure as exc:
            keep = exc.reusable and await smtp.reset(lease.client)
            await self._checkin(config, lease.client, keep)
            raise
        except BaseException:
            await self._checkin(config, lease.client, False)
            raise
        return lease, refused

    async def _abort(self, config: SmtpConfig, lease: _Lease) -> None:
        """`before_data` refused to go on: RSET the open transaction, keep the connection."""
        keep = False
        try:
            keep = await smtp.reset(lease.client)
        finally:
            await self._checkin(config, lease.client, keep)

    async def _finish(self, config: SmtpConfig, lease: _Lease, content: bytes) -> str:
        """DATA, then the connection back: kept after any reply, closed after an I/O error."""
        try:
            reply = await smtp.send_data(lease.client, content)
        except SmtpFailure as exc:
            await self._checkin(config, lease.client, exc.reusable)
            raise
        except BaseException:
            await self._checkin(config, lease.client, False)
            raise
        await self._checkin(config, lease.client, True)
        return reply

    async def _begin(self, config: SmtpConfig, lease: _Lease, envelope: Envelope) -> dict[str, str]:
        try:
            return await smtp.begin(lease.client, config, envelope, reused=lease.reused)
        except smtp.StaleConnection:
            await smtp.close(lease.client, polite=False)
            lease.client = await smtp.connect(config)
            lease.reused = False
            self._host(config).opened += 1
            return await smtp.begin(lease.client, config, envelope, reused=False)

    async def _checkin(self, config: SmtpConfig, client: aiosmtplib.SMTP, keep: bool) -> None:
        host = self._host(config)
        try:
            if keep and client.is_connected and not self._closed:
                host.idle.append((client, time.monotonic()))
            else:
                await smtp.close(client, polite=keep)
        finally:
            host.slots.release()

    async def _stats(self) -> dict[str, int]:
        return {
            "opened": sum(h.opened for h in self._hosts.values()),
            "idle": sum(len(h.idle) for h in self._hosts.values()),
        }

    async def _close_all(self) -> None:
        for host in self._hosts.values():
            while host.idle:
                client, _ = host.idle.pop()
                await smtp.close(client, polite=True)
