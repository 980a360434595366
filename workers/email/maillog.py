"""Did the SMTP server take the message? Reading Postfix's log for an UNCONFIRMED email.

An UNCONFIRMED email lost its connection while DATA was in flight (delivery.py): only the
server knows whether it queued the message. Finding its Message-ID in Postfix's log is not the
answer: cleanup(8) logs `<queue id>: message-id=<...>` while the message is still arriving,
before anything is committed, and logs it too for a message it then refuses (header_checks,
a milter) or whose client disconnected mid-DATA (issue 16). A message is Postfix's
responsibility once its queue file is committed; the first line that proves it is qmgr(8)
picking the queue id up — `<queue id>: from=<...>, size=..., nrcpt=N (queue active)` — and
every delivery line of that queue id (`status=sent|deferred|bounced`) proves it as well.

    fleet email check-log EMAIL_ID --org ORG --log /var/log/mail.log
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

#: The message is in the queue: send nothing again.
QUEUED = "QUEUED"
#: cleanup saw the Message-ID but the message was never queued: safe to resend.
NOT_QUEUED = "NOT_QUEUED"
#: The Message-ID is not in this log (another file, rotated, another server): look further.
NOT_FOUND = "NOT_FOUND"

_QUEUE_ID = r"(?P<qid>[0-9A-Za-z]{6,})"


@dataclass(frozen=True)
class Verdict:
    status: str
    #: Queue ids whose cleanup logged the Message-ID (one per try that reached DATA).
    queue_ids: tuple[str, ...] = ()
    #: The queue ids that made it into the queue.
    queued: tuple[str, ...] = ()
    #: The log lines of those queue ids, for the operator to read.
    lines: tuple[str, ...] = field(default=(), repr=False)


def postfix_verdict(lines: Iterable[str], message_id: str) -> Verdict:
    """Whether Postfix queued the message with `message_id`, from its log lines."""
    cleanup = re.compile(
        rf"postfix[^:]*/cleanup\[\d+\]: {_QUEUE_ID}: message-id={re.escape(message_id)}"
    )
    queue_ids: list[str] = []
    by_qid: dict[str, list[str]] = {}
    for line in lines:
        match = cleanup.search(line)
        if match and match.group("qid") not in queue_ids:
            queue_ids.append(match.group("qid"))
        for qid in queue_ids:
            if f" {qid}: " in line:
                by_qid.setdefault(qid, []).append(line.rstrip("\n"))
    if not queue_ids:
        return Verdict(NOT_FOUND)
    queued = tuple(q for q in queue_ids if any(_proves_queued(line) for line in by_qid.get(q, ())))
    related = tuple(line for q in queue_ids for line in by_qid.get(q, ()))
    return Verdict(QUEUED if queued else NOT_QUEUED, tuple(queue_ids), queued, related)


def _proves_queued(line: str) -> bool:
    if re.search(r"/qmgr\[\d+\]: \S+: from=<.*\(queue active\)", line):
        return True
    return re.search(r"\bstatus=(sent|deferred|bounced|expired)\b", line) is not None
