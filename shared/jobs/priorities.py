"""A job's priority in its queue: a closed set, honoured fleet-wide by the fetch
(shared/broker/lanes.py; docs/kernel.md, "Fair share, limits and priorities"). Light: a
producer imports it without Dramatiq."""

from __future__ import annotations

from typing import Literal

from ..errors import UnknownPriority

Priority = Literal["high", "default", "low"]
#: The closed set of priorities, highest first.
PRIORITIES: tuple[Priority, ...] = ("high", "default", "low")


def check_priority(priority: str) -> Priority:
    """`priority`, or `UnknownPriority` when it is not one of high, default, low."""
    if priority not in PRIORITIES:
        raise UnknownPriority(f"unknown priority {priority!r}: one of {', '.join(PRIORITIES)}")
    return priority
