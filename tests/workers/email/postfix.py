"""A private Postfix instance (and postgrey) for the email tests: the real MTA of issue 16.

Its own configuration, queue and log under a temp dir, smtpd on a free loopback port; the
system instance (if any) is not touched. Recipients choose the behaviour, like the aiosmtpd
test server:
  reject*@     RCPT answered 550 5.1.1 (check_recipient_access)
  greylist*@   RCPT goes through postgrey (`--delay` seconds): 450 4.2.0 until it has waited
  anything else accepted and delivered by a pipe into `<dir>/delivered/<queue id>-*.eml`
  (or discarded after its queueing, `deliver=False`: what the benchmark measures)
`port` offers SMTPUTF8; `ascii_port` (same instance) does not, like many relays;
`limited_port` allows `connection_limit` concurrent connections per client (421 beyond).
  bounce-me*@  accepted, then refused by the transport (error:5.1.1): Postfix writes a DSN
               (RFC 3464) to the envelope sender
Mail for `bounces.test.jobfleet` (VERP senders: the DSNs) is relayed over SMTP to
127.0.0.1:`bounce_port`, where a test runs the inbound listener.
A Subject holding `reject-at-data` is refused by cleanup's header_checks (550 5.7.1 to DATA)
after cleanup has logged its Message-ID; the log is `<dir>/maillog` (postlogd).

Needs root (Postfix drops privileges to `postfix`) and `workers/email/install_test_postfix.sh`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

POSTFIX = "/usr/sbin/postfix"
POSTGREY = "/usr/sbin/postgrey"


def available() -> str | None:
    """None when a private instance can run here, else why not."""
    if not (os.path.exists(POSTFIX) and os.path.exists(POSTGREY)):
        return "postfix/postgrey not installed (bash workers/email/install_test_postfix.sh)"
    if os.geteuid() != 0:
        return "a private Postfix instance needs root"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


MAIN_CF = """\
compatibility_level = 3.6
queue_directory = {d}/queue
data_directory = {d}/data
mail_owner = postfix
setgid_group = postdrop
myhostname = mx.test.jobfleet
mydomain = test.jobfleet
myorigin = test.jobfleet
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
maillog_file = {d}/maillog
maillog_file_prefixes = {d}
smtputf8_enable = {smtputf8}
relay_domains = static:ALL
default_transport = {transport}
relay_transport = {transport}
local_transport = {transport}
transport_maps = regexp:{d}/etc/transport.regexp
# else smtpd refuses at RCPT what the error transport would bounce (no DSN to test)
smtpd_reject_unlisted_recipient = no
smtpd_restriction_classes = greylisting
greylisting = check_policy_service inet:127.0.0.1:{grey_port}
smtpd_recipient_restrictions = check_recipient_access regexp:{d}/etc/recipients.regexp,
    permit_mynetworks, reject
header_checks = regexp:{d}/etc/header_checks.regexp
smtpd_client_connection_count_limit = 50
smtpd_client_connection_rate_limit = 0
smtpd_client_message_rate_limit = 0
smtpd_client_recipient_rate_limit = 0
anvil_rate_time_unit = 60s
default_process_limit = 100
smtpd_timeout = 30s
alias_maps =
alias_database =
biff = no
delay_warning_time = 0
"""

MASTER_CF = """\
{port} inet n - n - - smtpd
{ascii_port} inet n - n - - smtpd
  -o smtpd_discard_ehlo_keywords=smtputf8
{limited_port} inet n - n - - smtpd
  -o smtpd_client_connection_count_limit={connection_limit}
  -o smtpd_client_event_limit_exceptions=
pickup    unix  n - n 60 1 pickup
cleanup   unix  n - n - 0 cleanup
qmgr      unix  n - n 300 1 qmgr
rewrite   unix  - - n - - trivial-rewrite
bounce    unix  - - n - 0 bounce
defer     unix  - - n - 0 bounce
trace     unix  - - n - 0 bounce
verify    unix  - - n - 1 verify
flush     unix  n - n 1000? 0 flush
proxymap  unix  - - n - - proxymap
showq     unix  n - n - - showq
error     unix  - - n - - error
smtp      unix  - - n - - smtp
retry     unix  - - n - - error
discard   unix  - - n - - discard
anvil     unix  - - n - 1 anvil
scache    unix  - - n - 1 scache
postlog   unix-dgram n - n - 1 postlogd
filed     unix  - n n - - pipe
  flags=q user=nobody argv={d}/etc/deliver.sh {d}/delivered/${{queue_id}}
"""

RECIPIENTS = """\
/^reject/ 550 5.1.1 User unknown
/^greylist/ greylisting
"""

DELIVER_SH = """#!/bin/sh
# one file per delivery: <queue id>-<pid>.eml
cat > "$1-$$.eml"
"""

TRANSPORT = """\
/^bounce-me/ error:5.1.1 Mailbox does not exist (test transport)
/@bounces\\.test\\.jobfleet$/ smtp:[127.0.0.1]:{bounce_port}
"""
#: The domain of the VERP senders whose mail (DSNs) goes to `bounce_port`.
BOUNCE_DOMAIN = "bounces.test.jobfleet"

HEADER_CHECKS = "/^Subject:.*reject-at-data/ REJECT 5.7.1 Message content rejected\n"


class Postfix:
    def __init__(
        self,
        directory: Path,
        *,
        port: int | None = None,
        greylist_delay_s: int = 3,
        smtputf8: bool = True,
        connection_limit: int = 2,
        deliver: bool = True,
    ) -> None:
        self.dir = Path(directory)
        self.port = port or free_port()
        self.ascii_port = free_port()
        self.limited_port = free_port()
        self.grey_port = free_port()
        self.bounce_port = free_port()
        self.greylist_delay_s = greylist_delay_s
        self.smtputf8 = smtputf8
        self.connection_limit = connection_limit
        self.deliver = deliver
        self.postgrey: subprocess.Popen[bytes] | None = None

    @property
    def config_dir(self) -> Path:
        return self.dir / "etc"

    @property
    def maillog(self) -> Path:
        return self.dir / "maillog"

    def _postfix(self, command: str) -> None:
        # `postfix` writes its diagnostics to stderr only when it is a terminal; the log has them.
        done = subprocess.run(
            [POSTFIX, "-c", str(self.config_dir), command], capture_output=True, timeout=60
        )
        if done.returncode != 0:
            tail = self.maillog.read_text(errors="replace")[-3000:] if self.maillog.exists() else ""
            raise RuntimeError(f"postfix {command} failed ({done.returncode}):\n{tail}")

    def start(self) -> Postfix:
        d = self.dir
        for sub in ("etc", "queue", "data", "delivered", "postgrey"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        d.chmod(0o755)  # the postfix user walks into its queue and data directories
        shutil.chown(d / "data", "postfix")
        shutil.chown(d / "postgrey", "postgrey", "postgrey")
        (d / "delivered").chmod(0o1777)  # written by the pipe as `nobody`
        values = {
            "d": d,
            "port": self.port,
            "ascii_port": self.ascii_port,
            "limited_port": self.limited_port,
            "grey_port": self.grey_port,
            "smtputf8": "yes" if self.smtputf8 else "no",
            "connection_limit": self.connection_limit,
            "transport": "filed" if self.deliver else "discard",
            "bounce_port": self.bounce_port,
        }
        (d / "etc" / "main.cf").write_text(MAIN_CF.format(**values))
        (d / "etc" / "master.cf").write_text(MASTER_CF.format(**values))
        (d / "etc" / "recipients.regexp").write_text(RECIPIENTS)
        (d / "etc" / "header_checks.regexp").write_text(HEADER_CHECKS)
        (d / "etc" / "transport.regexp").write_text(TRANSPORT.format(**values))
        (d / "etc" / "deliver.sh").write_text(DELIVER_SH)
        (d / "etc" / "deliver.sh").chmod(0o755)
        self.postgrey = subprocess.Popen(
            [POSTGREY, f"--inet=127.0.0.1:{self.grey_port}", f"--dbdir={d / 'postgrey'}",
             f"--delay={self.greylist_delay_s}", "--auto-whitelist-clients=0",
             "--whitelist-clients=/dev/null", "--whitelist-recipients=/dev/null",
             f"--pidfile={d / 'postgrey.pid'}", "--hostname=mx.test.jobfleet"],
            stdout=subprocess.DEVNULL, stderr=open(d / "postgrey.log", "wb"),  # noqa: SIM115
        )  # fmt: skip
        self._postfix("start")
        _wait_listening(self.grey_port, self.postgrey)
        _wait_listening(self.port)
        _wait_listening(self.ascii_port)
        _wait_listening(self.limited_port)
        return self

    def stop(self) -> None:
        try:
            self._postfix("stop")
        finally:
            if self.postgrey is not None and self.postgrey.poll() is None:
                self.postgrey.terminate()
                try:
                    self.postgrey.wait(10)
                except subprocess.TimeoutExpired:
                    self.postgrey.kill()

    def connections(self) -> int:
        """SMTP connections accepted so far (all listeners)."""
        return len(re.findall(r"/smtpd\[\d+\]: connect from ", self.log()))

    def log(self) -> str:
        return self.maillog.read_text(errors="replace") if self.maillog.exists() else ""

    def queue_id(self, message_id: str) -> str | None:
        """The queue id whose cleanup logged `message_id` (it need not have been queued)."""
        match = re.search(rf"\]: ([0-9A-F]+): message-id={re.escape(message_id)}", self.log())
        return match.group(1) if match else None

    def delivered(self, message_id: str) -> list[Path]:
        """Delivered copies of the message (one file per queue id and recipient)."""
        needle = f"Message-ID: {message_id}".lower().encode()
        return [
            p
            for p in sorted((self.dir / "delivered").glob("*.eml"))
            if needle in p.read_bytes().lower()
        ]

    def envelope_recipients(self, message_id: str) -> list[str]:
        """`to=<...>` of the delivery lines of the message's queue id."""
        queue_id = self.queue_id(message_id)
        if queue_id is None:
            return []
        return re.findall(rf"{queue_id}: to=<([^>]*)>.*status=sent", self.log())


def _wait_listening(
    port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on 127.0.0.1:{port}") from None
            time.sleep(0.1)
