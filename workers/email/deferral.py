"""When a deferred email is tried again, and when deferring stops (issue 16).

A 4xx reply, a refused connection or a timeout before DATA says something about the server,
not about the email: RFC 5321 §4.5.4.1 expects a sender to keep trying for hours (greylisting
answers 4xx for the first minutes on purpose; a relay restart refuses connections for a while).
Such tries spend no attempt (the attempts are for failures of the email itself); they wait
`min_s`, then twice as long each time up to `max_s`, with up to 25 % jitter so that the mail
held back by an outage does not come back all at once, until `window_s` after the first
deferral: then the email FAILED with the last reply (DESIGN §3: the outage window).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.outage import OutageWindow

if TYPE_CHECKING:
    from .settings import EmailSettings


@dataclass(frozen=True)
class DeferralPolicy(OutageWindow):
    """Email's outage window (`EMAIL_DEFER_*`, `EMAIL_OUTAGE_WINDOW_S`); the back-off and the
    window's end are the kernel's (`shared/outage.py`)."""

    min_s: float = 60.0
    max_s: float = 1_800.0
    window_s: float = 86_400.0

    @classmethod
    def from_settings(cls, settings: EmailSettings) -> DeferralPolicy:
        return cls(
            min_s=settings.defer_min_s,
            max_s=settings.defer_max_s,
            window_s=settings.outage_window_s,
        )
