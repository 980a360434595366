"""Binding a worker's handler to a job its domain declares. For example:

    @handler(catalog.INVOICE_SEND)  # a product's own `billing` domain, say
    def send_invoice(payload: InvoiceSendV1, job: JobContext) -> dict | None: ...

The decorated object is a `BoundJob`: `send_invoice.send(payload)` is the producer path of the
declaration, and the Dramatiq actor (name = job name, queue = job queue) parses and upgrades
the payload before the handler sees it. An invalid payload is a permanent `InvalidPayload`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import dramatiq

from ..contracts.base import Payload
from ..errors import InvalidPayload, JobCanceled
from .context import JobContext, current_job
from .spec import JobSpec

if TYPE_CHECKING:
    from .send import SendResult

P = TypeVar("P", bound=Payload)
Handler = Callable[[P, JobContext], Any]

#: Every job bound in this process, by job name (the test kit's `drain` runs them inline).
BOUND: dict[str, BoundJob[Any]] = {}


class BoundJob(Generic[P]):
    def __init__(self, spec: JobSpec[P], fn: Handler[P], actor: dramatiq.Actor[Any, Any]) -> None:
        self.spec = spec
        self.fn = fn
        self.actor = actor

    @property
    def name(self) -> str:
        return self.spec.name

    def send(
        self,
        payload: P | Mapping[str, Any],
        *,
        request_id: str | None = None,
        delay_ms: int | None = None,
    ) -> SendResult:
        return self.spec.send(payload, request_id=request_id, delay_ms=delay_ms)

    def __call__(self, payload: P, job: JobContext) -> Any:
        """Run the handler directly (tests, CLI); no tracking."""
        return self.fn(payload, job)

    def __repr__(self) -> str:
        return f"BoundJob({self.spec.name!r} -> {self.fn.__module__}.{self.fn.__qualname__})"


def handler(
    spec: JobSpec[P], *, broker: dramatiq.Broker | None = None
) -> Callable[[Handler[P]], BoundJob[P]]:
    def decorate(fn: Handler[P]) -> BoundJob[P]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if len(args) != 1 or kwargs:  # checked by the tracking middleware already
                raise InvalidPayload(f"{spec.name}: one positional payload argument expected")
            job = current_job()
            if job is not None and job.parsed is not None and job.job_name == spec.name:
                payload = job.parsed
            else:
                payload = spec.contract.parse(args[0])
            job = job or _detached(spec, payload)
            if job.cancel_requested:
                raise JobCanceled(f"{job.job_id} canceled before this delivery started")
            # The result travels on the context to the tracking middleware; the actor returns
            # None, so Dramatiq doesn't warn that no Results middleware keeps it.
            job.result = fn(payload, job)

        run.__name__ = run.__qualname__ = fn.__name__
        run.__module__ = fn.__module__
        from ..middleware.tracking import EXPECTED_FAILURES

        options: dict[str, Any] = {"job_spec": spec, "throws": EXPECTED_FAILURES}
        if spec.time_limit_ms is not None:
            options["time_limit"] = spec.time_limit_ms
        target = broker or dramatiq.get_broker()
        if not {"job_spec", "throws"} <= target.actor_options:
            options = {k: v for k, v in options.items() if k in target.actor_options}
        actor: dramatiq.Actor[Any, Any] = dramatiq.Actor(
            run,
            broker=target,
            actor_name=spec.name,
            queue_name=spec.queue,
            priority=0,
            options=options,
        )
        bound = BoundJob(spec, fn, actor)
        BOUND[spec.name] = bound
        return bound

    return decorate


def bind_handlers(
    handlers: Mapping[JobSpec[Any], Handler[Any]], broker: dramatiq.Broker | None = None
) -> dict[str, BoundJob[Any]]:
    """Bind a domain's `HANDLERS` (job declaration -> function) to `broker` (default: the
    process's global broker): the worker's `app` binds them to its own, tests to theirs."""
    return {spec.name: handler(spec, broker=broker)(fn) for spec, fn in handlers.items()}


def _detached(spec: JobSpec[Any], payload: Payload) -> JobContext:
    """A context for a handler run outside the tracking middleware (stub brokers)."""
    return JobContext(
        job_id=spec.job_id(payload),
        job_name=spec.name,
        queue=spec.queue,
        org_id=payload.org_id,
        attempt=1,
        max_attempts=1,
        message_id="",
    )
