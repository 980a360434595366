"""What one delivery of a message carries through a worker: one typed object per delivery.

Dramatiq hands each delivery to the middleware and the consumer as a `MessageProxy`: a new
proxy per delivery (a retry or a redelivery is another one), which takes attributes of its own.
The middleware record what they decide on it (the tracking fields, the run's context, the
gate it holds, its outcome) and the consumer reads from it whether its acknowledgement waits
for a durable outcome (`acker.py`). All of it is one `Delivery`, attached by `delivery_of()`
the first time a hook asks for it, so each field is declared and typed once.

What else the middleware need from a proxy that Dramatiq keeps in private attributes (the
message it wraps, the exception of a failed delivery) is read here too (`version.py`).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from dramatiq.broker import MessageProxy
from dramatiq.message import Message

if TYPE_CHECKING:
    from ..jobs.context import JobContext
    from ..jobs.message import MessageInfo
    from ..jobs.outcome import Outcome

#: The attribute of a `MessageProxy` that holds its `Delivery`.
ATTRIBUTE = "fleet"


class Durable(Protocol):
    """A terminal outcome on its way to the run store (`middleware/tracking.py`)."""

    def wait(self, timeout: float) -> bool:
        """True once the outcome is durable (or the message was handed back): ack it."""
        ...


@dataclass(slots=True)
class Delivery:
    #: The message's tracking fields (`jobs/message.py`), computed once per delivery.
    info: MessageInfo | None = None
    #: The run's context, once its start is recorded (None: not started by this delivery).
    ctx: JobContext | None = None
    #: The gate of the process this delivery holds (`middleware/tracking.py`: `SoloGate`).
    gate: Literal["shared", "solo"] | None = None
    #: `time.monotonic()` when its run started.
    started: float = 0.0
    #: The token of `set_current_job` while its handler runs.
    token: contextvars.Token[JobContext | None] | None = None
    #: The outcome the tracking middleware decided (read by the metrics middleware).
    outcome: Outcome | None = None
    #: A terminal outcome still being made durable: the consumer acks once it is.
    durable: Durable | None = None
    #: Put back on its queue rather than acknowledged: what was to follow it (a deferral, a
    #: retry) could not be enqueued, Redis being unreachable. The consumer's "ack" requeues
    #: it, retried by Dramatiq until Redis answers (`consumer.py`).
    hand_back: bool = False
    #: `time.perf_counter()` when the metrics middleware saw it start.
    metrics_t0: float | None = None


def delivery_of(message: Any) -> Delivery:
    """The `Delivery` of `message` (a `MessageProxy`), attached on first use. A `Message` itself
    is shared and frozen, and refuses it (`FrozenInstanceError`)."""
    state: Delivery | None = message.__dict__.get(ATTRIBUTE)
    if state is None:
        state = Delivery()
        setattr(message, ATTRIBUTE, state)
    return state


def is_delivery(message: Any) -> bool:
    """Is `message` one delivery (a `MessageProxy`) rather than a `Message`, which is shared
    (its copies, its retries) and frozen?"""
    return isinstance(message, MessageProxy)


def message_of(proxy: MessageProxy) -> Message[Any]:
    """The `Message` a delivery wraps (Dramatiq keeps it in the proxy's private `_message`)."""
    message: Message[Any] = proxy._message
    return message


def failure_of(proxy: MessageProxy) -> BaseException | None:
    """The exception Dramatiq stuffed into a failed delivery (its private `_exception`): for
    a message of an undeclared actor, `ActorNotFound`, set before `before_nack`."""
    return getattr(proxy, "_exception", None)
