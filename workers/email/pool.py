"""The SMTP connections of a worker process: opened once, reused across jobs (issue 16).

One connection per email cost a TCP and SMTP handshake each time (~75 emails/s to Postfix)
and, with a relay that limits concurrent connections per client, got most of them refused.
The pool keeps at most `per_host` connections open to each server and lends them to the
worker threads one transaction at a time; a thread beyond the limit waits for one (at most
4 x the SMTP timeout, then the email is deferred).

The worker thread runs the whole transaction itself on the connection it borrowed (smtplib,
blocking calls bounded by the socket timeout), `before_data` (a database write) included:
no event loop, no hand-off between threads (each cost two context switches and two waits for
the GIL per phase; the CPU of the machine, not the server, bounded the rate). A connection goes
back to the pool only in a known state:
- after 250 to DATA, or any reply to DATA (the transaction is over either way);
- after a refusal of MAIL or of the primary RCPT, or a `before_data` that raised, once RSET
  is answered;
- never after a network error, a timeout or a 421 (closed instead).
A pooled connection the server closed meanwhile (its idle timeout) is found at the first
command, before anything is sent, and replaced by a new one transparently. Connections idle
for longer than `idle_s` are closed.

An exception raised in the thread from outside (dramatiq's time limit: it surfaces once a
blocking call returns) is handled like any other: a thread interrupted while waiting for a
connection takes none (and passes on the wake-up it may have consumed); one interrupted during
its transaction closes the connection and frees its slot.
"""

from __future__ import annotations

import smtplib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import smtp
from .message import Envelope
from .smtp import Accepted, SmtpConfig, SmtpDeferred, SmtpFailure

if TYPE_CHECKING:
    from .settings import EmailSettings


@dataclass
class _Host:
    #: Connections lent out now (at most `per_host`).
    busy: int = 0
    #: (connection, monotonic time it became idle), most recent last.
    idle: list[tuple[smtplib.SMTP, float]] = field(default_factory=list)
    opened: int = 0


@dataclass
class _Lease:
    client: smtplib.SMTP
    reused: bool


class SmtpPool:
    def __init__(self, *, per_host: int = 8, idle_s: float = 30.0) -> None:
        self.per_host = per_host
        self.idle_s = idle_s
        self._hosts: dict[SmtpConfig, _Host] = {}
        self._changed = threading.Condition(threading.Lock())
        self._closed = False

    @classmethod
    def from_settings(cls, settings: EmailSettings) -> SmtpPool:
        return cls(per_host=settings.smtp_pool_size, idle_s=settings.smtp_pool_idle_s)

    def send(
        self,
        config: SmtpConfig,
        content: bytes,
        envelope: Envelope,
        *,
        before_data: Callable[[], None],
    ) -> Accepted:
        """One transaction on a pooled connection (same contract as a fresh connection):
        MAIL and RCPT, `before_data()`, then DATA."""
        host = self._acquire(config)
        lease: _Lease | None = None
        keep = False
        try:
            lease = self._checkout(config, host)
            try:
                refused = self._begin(config, host, lease, envelope)
            except SmtpFailure as exc:
                keep = exc.reusable and smtp.reset(lease.client)
                raise
            try:
                before_data()
            except BaseException:
                keep = smtp.reset(lease.client)  # nothing was sent: RSET, keep the connection
                raise
            try:
                reply = smtp.send_data(lease.client, content)
            except SmtpFailure as exc:
                keep = exc.reusable  # a reply to DATA ends the transaction
                raise
            keep = True
            return Accepted(reply=reply, refused=refused)
        finally:
            self._checkin(host, lease, keep)

    def stats(self) -> dict[str, int]:
        """Connections opened so far and idle now, summed over the servers."""
        with self._changed:
            return {
                "opened": sum(h.opened for h in self._hosts.values()),
                "idle": sum(len(h.idle) for h in self._hosts.values()),
            }

    def close(self) -> None:
        """QUIT the idle connections; those lent out are closed when they come back."""
        with self._changed:
            self._closed = True
            idle = [client for host in self._hosts.values() for client, _ in host.idle]
            for host in self._hosts.values():
                host.idle.clear()
        for client in idle:
            smtp.close(client, polite=True)

    # -- the slots --------------------------------------------------------------------------

    def _acquire(self, config: SmtpConfig) -> _Host:
        """A slot for `config`'s server: `busy` counted for this thread on return."""
        wait_s = 4 * config.timeout_s  # every holder is bounded by the SMTP timeouts
        deadline = time.monotonic() + wait_s
        with self._changed:
            host = self._hosts.get(config)
            if host is None:
                host = self._hosts[config] = _Host()
            while host.busy >= self.per_host:
                remaining = deadline - time.monotonic()
                try:
                    if remaining <= 0 or not self._changed.wait(remaining):
                        raise SmtpDeferred(
                            f"no free connection to {config.host}:{config.port} within "
                            f"{wait_s:g} s ({self.per_host} in use)",
                            stage="connect",
                        )
                except BaseException:
                    self._changed.notify()  # a wake-up this thread consumed goes to another
                    raise
            host.busy += 1  # (no call between the count and the return: nothing interrupts)
            return host

    def _checkout(self, config: SmtpConfig, host: _Host) -> _Lease:
        """The most recently used idle connection, or a new one (`SmtpDeferred`...)."""
        expired: list[smtplib.SMTP] = []
        now = time.monotonic()
        found: smtplib.SMTP | None = None
        with self._changed:
            while host.idle:
                client, since = host.idle.pop()
                if now - since < self.idle_s and smtp.is_connected(client):
                    found = client
                    break
                expired.append(client)
        for client in expired:
            smtp.close(client, polite=False)
        if found is not None:
            return _Lease(found, reused=True)
        return _Lease(self._connect(config, host), reused=False)

    def _connect(self, config: SmtpConfig, host: _Host) -> smtplib.SMTP:
        client = smtp.connect(config)
        with self._changed:
            host.opened += 1
        return client

    def _begin(
        self, config: SmtpConfig, host: _Host, lease: _Lease, envelope: Envelope
    ) -> dict[str, str]:
        try:
            return smtp.begin(lease.client, config, envelope, reused=lease.reused)
        except smtp.StaleConnection:
            smtp.close(lease.client, polite=False)
            lease.client = self._connect(config, host)
            lease.reused = False
            return smtp.begin(lease.client, config, envelope, reused=False)

    def _checkin(self, host: _Host, lease: _Lease | None, keep: bool) -> None:
        """The connection back (idle) or closed, and the slot free."""
        try:
            if lease is not None:
                if keep and smtp.is_connected(lease.client) and not self._closed:
                    with self._changed:
                        host.idle.append((lease.client, time.monotonic()))
                else:
                    smtp.close(lease.client, polite=keep)
        finally:
            with self._changed:
                host.busy -= 1
                self._changed.notify()
