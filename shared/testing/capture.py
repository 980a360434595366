"""Capturing sends in a product's own tests: no Redis, no Postgres, the production contracts.

`JobCapture` installs itself as the process's runtime. From then on every `spec.send(...)`,
domain client call and `outbox.enqueue(...)` is validated by the job's contract, gets its job
id derived exactly as in production (`spec.job_id`) and goes through the same wire round trip a
worker would parse, then is recorded instead of enqueued. Tests then ask what was sent
(`assert_sent`, `assert_not_sent`, `sent_jobs`) and may run the captured jobs' handlers inline
(`drain`), like Dramatiq's StubBroker + `worker.join()` or Oban's `assert_enqueued` /
`perform_job`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..contracts.base import Payload
from ..errors import FleetError
from ..jobs.context import JobContext, current_job, request_id_var, set_current_job
from ..jobs.handler import BOUND
from ..jobs.priorities import check_priority
from ..jobs.send import SendResult
from ..jobs.spec import JobSpec
from ..runtime import Runtime, set_runtime
from .session import RecordingSession

if TYPE_CHECKING:
    import dramatiq
    from psycopg_pool import ConnectionPool

Handler = Callable[[Any, JobContext], Any]


class NotAvailableInCapture(FleetError):
    """The jobfleet test kit captures sends: this test has no broker and no run store."""

    code = "CAPTURED"


@dataclass
class SentJob:
    """One captured send: what a worker would receive."""

    spec: JobSpec[Any]
    payload: Payload
    job_id: str
    request_id: str | None
    delay_ms: int | None
    via: str  # "send" or "outbox"
    #: Its priority in its queue (the send's, else the job's own).
    priority: str = "default"
    #: PENDING until `drain` runs it, then COMPLETED or DEAD.
    status: str = "PENDING"
    result: Any = None
    error: BaseException | None = field(default=None, repr=False)

    @property
    def job_name(self) -> str:
        return self.spec.name

    def matches(self, fields: Mapping[str, Any]) -> bool:
        return all(_field(self.payload, name) == value for name, value in fields.items())


_MISSING = object()


def _field(payload: Payload, name: str) -> Any:
    value: Any = payload
    for part in name.split("__"):  # nested fields: params__format
        value = (
            value.get(part, _MISSING)
            if isinstance(value, Mapping)
            else getattr(value, part, _MISSING)
        )
    return value


class CapturingSender:
    def __init__(self) -> None:
        self.sent: list[SentJob] = []
        #: Jobs staged in a transaction that has not ended yet (sent once it commits).
        self.staged: list[SentJob] = []

    def send(
        self,
        spec: JobSpec[Any],
        payload: Payload | Mapping[str, Any],
        *,
        request_id: str | None = None,
        delay_ms: int | None = None,
        priority: str | None = None,
    ) -> SendResult:
        # UnknownPriority as in production, before anything is recorded
        chosen = check_priority(priority) if priority is not None else spec.priority
        job = self.record(spec, payload, request_id=request_id, delay_ms=delay_ms, via="send")
        job.priority = chosen
        return SendResult(
            job.job_id, str(uuid.uuid4()), duplicate=job.status == "DUPLICATE", status="QUEUED"
        )

    def record(
        self,
        spec: JobSpec[Any],
        payload: Payload | Mapping[str, Any],
        *,
        request_id: str | None,
        delay_ms: int | None,
        via: str,
    ) -> SentJob:
        return self._append(self._prepare(spec, payload, request_id, delay_ms, via))

    def stage(
        self,
        session: Any,
        spec: JobSpec[Any],
        payload: Payload | Mapping[str, Any],
        *,
        request_id: str | None,
        delay_ms: int | None,
        via: str,
    ) -> SentJob:
        """`outbox.enqueue` under the kit: validated now, sent once `session`'s transaction
        commits, dropped if it rolls back (as in production: no commit, no job)."""
        job = self._prepare(spec, payload, request_id, delay_ms, via)
        self.staged.append(job)

        def committed() -> None:
            self._forget_staged(job)
            self._append(job)

        on_transaction_end(session, commit=committed, rollback=lambda: self._forget_staged(job))
        return job

    def _forget_staged(self, job: SentJob) -> None:
        self.staged = [other for other in self.staged if other is not job]

    def _prepare(
        self,
        spec: JobSpec[Any],
        payload: Payload | Mapping[str, Any],
        request_id: str | None,
        delay_ms: int | None,
        via: str,
    ) -> SentJob:
        model = spec.build(payload)  # PayloadError exactly as in production
        job_id = spec.job_id(model)
        wired = spec.contract.parse(model.wire())  # what the worker's actor will parse
        request_id = request_id or request_id_var.get()
        return SentJob(spec, wired, job_id, request_id, delay_ms, via, spec.priority)

    def _append(self, job: SentJob) -> SentJob:
        if any(other.job_id == job.job_id and other.status != "DEAD" for other in self.sent):
            job.status = "DUPLICATE"  # production enqueues nothing and answers duplicate=True
            return job
        self.sent.append(job)
        return job

    def flush(self, timeout: float = 10) -> bool:
        return True


class CaptureRuntime(Runtime):
    """A runtime whose sender records; anything that would reach Redis or Postgres says so."""

    captures_sends = True
    capture: JobCapture

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(settings or Settings())
        self.capture_sender = CapturingSender()
        self.__dict__["sender"] = self.capture_sender

    def _unavailable(self, what: str) -> NotAvailableInCapture:
        return NotAvailableInCapture(
            f"{what} is not available while the jobfleet test kit captures sends "
            "(this test runs without Redis and Postgres)"
        )

    @property
    def broker(self) -> dramatiq.Broker:
        raise self._unavailable("the broker")

    @property
    def pool(self) -> ConnectionPool:
        raise self._unavailable("the run store")

    def settle(self, timeout: float = 5) -> bool:
        return True


class JobCapture:
    """What a product's test asks about the jobs its code sent."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.runtime = CaptureRuntime(settings)
        self.runtime.capture = self

    @contextmanager
    def installed(self) -> Iterator[JobCapture]:
        previous = set_runtime(self.runtime)
        try:
            yield self
        finally:
            set_runtime(previous)

    def session(self) -> RecordingSession:
        """A stand-in SQLAlchemy session for the product's write paths: it records their
        statements (no database); their jobs are captured here as usual."""
        return RecordingSession()

    # -- Asking -------------------------------------------------------------------------------

    def sent_jobs(self, spec: JobSpec[Any] | str | None = None) -> list[SentJob]:
        name = spec if isinstance(spec, str) or spec is None else spec.name
        return [
            job for job in self.runtime.capture_sender.sent if name is None or job.job_name == name
        ]

    def staged_jobs(self, spec: JobSpec[Any] | str | None = None) -> list[SentJob]:
        """Jobs staged in a transaction that has neither committed nor rolled back yet: not
        sent (a worker would not see them)."""
        name = spec if isinstance(spec, str) or spec is None else spec.name
        return [
            job
            for job in self.runtime.capture_sender.staged
            if name is None or job.job_name == name
        ]

    def assert_sent(self, spec: JobSpec[Any] | str, **fields: Any) -> SentJob:
        """The one captured job of `spec` whose payload has these field values (nested fields as
        `params__format`); fails with what was sent instead. A field the job's payload does not
        have raises `TypeError` naming it (a misspelling would otherwise match nothing)."""
        _check_fields(spec, fields)
        found = [job for job in self.sent_jobs(spec) if job.matches(fields)]
        if len(found) == 1:
            return found[0]
        name = spec if isinstance(spec, str) else spec.name
        wanted = ", ".join(f"{k}={v!r}" for k, v in fields.items()) or "any payload"
        raise AssertionError(
            f"expected one {name} job with {wanted}, found {len(found)}; sent:\n{self._listing()}"
        )

    def assert_not_sent(self, spec: JobSpec[Any] | str, **fields: Any) -> None:
        _check_fields(spec, fields)
        found = [job for job in self.sent_jobs(spec) if job.matches(fields)]
        if found:
            name = spec if isinstance(spec, str) else spec.name
            raise AssertionError(
                f"expected no {name} job matching {fields!r}; sent:\n{self._listing()}"
            )

    def _listing(self) -> str:
        jobs = self.runtime.capture_sender.sent
        if not jobs:
            return "  (nothing)"
        return "\n".join(f"  {job.job_name} {job.job_id} {job.payload!r}" for job in jobs)

    # -- Running ------------------------------------------------------------------------------

    def drain(
        self,
        handlers: Mapping[JobSpec[Any] | str, Handler] | None = None,
        *,
        fail_fast: bool = True,
        max_jobs: int = 10_000,
    ) -> list[SentJob]:
        """Run every pending captured job's handler inline, in send order, including the jobs
        those handlers send, until none is left. A handler comes from `handlers` (by spec or job
        name; a domain's real ones: `workers.<domain>.actors.HANDLERS`), else from the handlers
        bound in this process. With
        `fail_fast`, a handler's exception propagates; otherwise the job is DEAD with it."""
        chosen = {(k if isinstance(k, str) else k.name): v for k, v in (handlers or {}).items()}
        ran: list[SentJob] = []
        while pending := [
            job for job in self.runtime.capture_sender.sent if job.status == "PENDING"
        ]:
            for job in pending:
                if len(ran) >= max_jobs:
                    raise RuntimeError(
                        f"drain ran {max_jobs} jobs and some are still pending: a loop?"
                    )
                fn = chosen.get(job.job_name) or _bound(job.job_name)
                if fn is None:
                    raise LookupError(
                        f"no handler for {job.job_name}: pass drain(handlers={{spec: fn}}), e.g. "
                        "a domain's own: drain(workers.<domain>.actors.HANDLERS)"
                    )
                ran.append(job)
                self._run(job, fn, fail_fast=fail_fast)
        return ran

    def _run(self, job: SentJob, fn: Handler, *, fail_fast: bool) -> None:
        ctx = JobContext(
            job_id=job.job_id,
            job_name=job.job_name,
            queue=job.spec.queue,
            org_id=job.payload.org_id,
            attempt=1,
            max_attempts=1,
            message_id=str(uuid.uuid4()),
            request_id=job.request_id,
        )
        previous = current_job()
        set_current_job(ctx)
        try:
            job.result = fn(job.payload, ctx)
            job.status = "COMPLETED"
        except Exception as exc:
            job.status, job.error = "DEAD", exc
            if fail_fast:
                raise
        finally:
            set_current_job(previous)


def _check_fields(spec: JobSpec[Any] | str, fields: Mapping[str, Any]) -> None:
    """`TypeError` for a field (`a__b` nested) that no payload version of `spec` has."""
    if isinstance(spec, str):
        from ..jobs import catalog

        spec = catalog.get(spec)
    for name in fields:
        models: list[Any] = list(spec.contract.versions)
        for depth, part in enumerate(name.split("__")):
            known = {f for model in models for f in model.model_fields}
            if part not in known:
                path = "__".join(name.split("__")[: depth + 1])
                raise TypeError(
                    f"{spec.name} payloads have no field {path!r}; fields: {', '.join(sorted(known))}"
                )
            nested = [
                model.model_fields[part].annotation
                for model in models
                if part in model.model_fields
            ]
            models = [t for t in nested if isinstance(t, type) and hasattr(t, "model_fields")]
            if not models:  # a dict, a list or a scalar: its keys are free-form
                break


_HOOKS = "jobfleet.testing.transaction_end"


def on_transaction_end(
    session: Any, *, commit: Callable[[], None], rollback: Callable[[], None]
) -> None:
    """Run `commit` once `session`'s transaction commits, `rollback` once it rolls back: on the
    kit's `RecordingSession`, or on a real SQLAlchemy session (a product's own test database)."""
    if isinstance(session, RecordingSession):
        session.on_transaction_end(commit=commit, rollback=rollback)
        return
    from sqlalchemy import event

    if _HOOKS not in session.info:
        session.info[_HOOKS] = _Hooks()

        def ended(kind: str) -> Callable[[Any], None]:
            def run(_: Any) -> None:
                pending: _Hooks = session.info[_HOOKS]
                session.info[_HOOKS] = _Hooks()
                for callback in pending.commit if kind == "commit" else pending.rollback:
                    callback()

            return run

        event.listen(session, "after_commit", ended("commit"))
        event.listen(session, "after_rollback", ended("rollback"))
    hooks: _Hooks = session.info[_HOOKS]
    hooks.commit.append(commit)
    hooks.rollback.append(rollback)


@dataclass
class _Hooks:
    commit: list[Callable[[], None]] = field(default_factory=list)
    rollback: list[Callable[[], None]] = field(default_factory=list)


def _bound(job_name: str) -> Handler | None:
    bound = BOUND.get(job_name)
    return bound.fn if bound is not None else None
