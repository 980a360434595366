"""Records every run in `job_runs` and decides retries, dead letters and redelivery.

It replaces Dramatiq's Retries middleware (whose defaults, 20 retries from 15 s, must not leak
through): the retry policy is the queue's (DESIGN §3), a `PermanentError` is dead at once, and
the outcome is durable in Postgres before the message is acknowledged.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import dramatiq
import structlog
from dramatiq.errors import ActorNotFound, Retry
from dramatiq.middleware import Middleware, SkipMessage
from dramatiq.middleware.middleware import MiddlewareError

from ..broker import Delivery, dedup_key, delivery_of, failure_of, message_of
from ..broker.starts import Kept, PriorStart, RunStarts
from ..config import RetryPolicy, Settings
from ..contracts.base import SYSTEM_ORG
from ..errors import AlreadyDone, InvalidPayload, LeaseLost, PermanentError, RetryLater
from ..jobs import catalog
from ..jobs.context import JobContext, set_current_job
from ..jobs.message import MessageInfo, message_info
from ..jobs.outcome import ERROR_MAX_CHARS, Outcome, decide
from ..jobs.run_writer import RELEASED, Blocked, Finish, RowRefused, RunWriter, Started

log = structlog.get_logger("jobfleet.tracking")
#: The standard logger behind `log`: asked first whether a level is enabled at all.
_stdlog = logging.getLogger("jobfleet.tracking")

#: Back-off when Postgres cannot record a start: the message goes back, no attempt counted.
TRACKING_DOWN_DELAY_MS = 3_000
#: How long a finished attempt keeps trying to make its outcome durable before giving up.
FINISH_PATIENCE_S = 30.0


class TrackingDown(MiddlewareError, Retry):
    """Postgres could not record the start of a run; the message is handed back.

    A `Retry` too: Dramatiq logs any other exception from a before-hook with its traceback,
    one per message and per hand-back (thousands while Postgres was down); `run.start_not_recorded`
    already says it in one line, and the consumers pause meanwhile (`db/watch.py`)."""


class Tracking(Middleware):
    #: `job_spec` is set by `jobs.handler`; `throws` keeps expected failures out of Dramatiq's
    #: "unhandled exception" error log.
    actor_options = {"job_spec", "throws"}

    def __init__(
        self, settings: Settings, writer: RunWriter, *, rng: random.Random | None = None
    ) -> None:
        self.settings = settings
        self.writer = writer
        self.rng = rng or random.Random()
        # A run is executed under a lease as long as the heartbeat timeout: a worker silent
        # that long is dead for Redis too, and its messages come back.
        writer.lease_s = settings.heartbeat_timeout_ms / 1000
        self.gate = SoloGate()
        #: Terminal outcomes handed to the durable lane and not yet acknowledged.
        self._outcomes: set[_PendingOutcome] = set()
        #: Runs this process is executing (job id -> context): their leases are renewed, until
        #: their outcome is durable (a lease that ran out meanwhile would let a redelivery
        #: take the run over while its COMPLETED row is on its way).
        self._running: dict[str, JobContext] = {}
        #: Their messages (to hand them back if the process stops before they end).
        self._messages: dict[str, Any] = {}
        #: Of those, the ones whose handler is done (their outcome on its way).
        self._settling: set[str] = set()
        self._stop = threading.Event()
        #: Runs started here whose start is kept in Redis, not yet in `job_runs` (job id ->
        #: `_KeptStart`): written with their outcome, or once they outlive `_write_after_s`.
        self._kept: dict[str, _KeptStart] = {}
        self._kept_changed = threading.Condition(threading.Lock())
        self._write_after_s = settings.tracking_start_write_after_ms / 1000
        self._starts: RunStarts | None = None
        self._sealer: ThreadPoolExecutor | None = None

    def after_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        self._stop.clear()
        threading.Thread(target=self._renew_leases, name="jobfleet-leases", daemon=True).start()

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        self._stop.set()

    def hand_back(self, broker: Any) -> int:
        """At shutdown, once the grace has passed: the runs still executing here (their handler
        did not end in time) are QUEUED again, not an attempt, and their messages go back to
        their queue at once. Before, they waited for the heartbeat maintenance and were then
        taken over one at a time (the next drain took 3x as long). Returns how many."""
        self._stop.set()  # no renewal from now on
        for job_id in [j for j, kept in list(self._kept.items()) if kept.state == "kept"]:
            # Its start kept in Redis is written first: then it is handed back like any run,
            # its execution on the record (if Postgres does not answer, its lease runs out and
            # it is taken over as after a crash, as any run whose hand-back fails).
            self._write_start(job_id)
        running = {
            job_id: self._messages[job_id]
            for job_id in list(self._running)
            if job_id not in self._settling and job_id in self._messages
        }
        if not running:
            return 0
        try:
            released = self.writer.release(list(running))
        except Exception as exc:  # their leases run out; they are taken over as after a crash
            log.warning("worker.hand_back_failed", runs=len(running), error=str(exc)[:200])
            return 0
        by_queue: dict[str, list[str]] = {}
        for job_id in released:
            message = running[job_id]
            redis_id = message.options.get("redis_message_id")
            if redis_id:
                by_queue.setdefault(message.queue_name, []).append(redis_id)
        try:
            for queue, ids in by_queue.items():
                broker.do_requeue(queue, *ids)
        except Exception as exc:  # QUEUED; the heartbeat maintenance returns the messages
            log.warning("worker.hand_back_failed", runs=len(released), error=str(exc)[:200])
        log.warning("worker.handed_back", runs=len(released), job_ids=sorted(released)[:20])
        return len(released)

    def _renew_leases(self) -> None:
        """Every heartbeat interval: extend the leases of the runs in flight; a run whose lease
        another execution took (this process stalled past it) is marked, and stops at its next
        progress report (`LeaseLost`)."""
        interval = self.settings.heartbeat_interval_ms / 1000
        # Kept starts are written once they outlive `_write_after_s`: looked at twice as often.
        tick = min(interval, self._write_after_s / 2) if self._write_after_s else interval
        renewed = time.monotonic()
        while not self._stop.wait(tick):
            self._write_due_starts()
            if time.monotonic() - renewed < interval - tick / 2:
                continue
            renewed = time.monotonic()
            running = dict(self._running)
            if not running:
                continue
            try:
                held = self.writer.renew(list(running))
            except Exception as exc:  # the leases run out; other deliveries may take over
                log.warning("run.lease_not_renewed", runs=len(running), error=str(exc)[:200])
                continue
            for job_id, ctx in running.items():
                if job_id in self._settling:
                    continue  # finished: its outcome is on its way (or written already)
                if job_id not in held and self._running.get(job_id) is ctx:
                    ctx.lease_lost = True
                    log.warning("run.lease_lost", job_id=job_id)

    def policy(self, broker: dramatiq.Broker, job_name: str, queue: str) -> RetryPolicy:
        """The bound spec's policy, else the catalog's, else the queue's from settings."""
        spec = None
        if job_name in broker.actors:
            spec = broker.get_actor(job_name).options.get("job_spec")
        spec = spec or catalog.BY_NAME.get(job_name)
        if spec is not None and spec.retry is not None:
            return spec.retry
        return self.settings.retry_policy(queue)

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        info = message_info(message)
        state = delivery_of(message)
        pauses = getattr(broker, "pause_watch", None)
        if pauses is not None and pauses.paused(message.queue_name):
            # Its queue was paused after the consumer handed it to this worker (`pauses.py`):
            # hand it back untouched, not started, not an attempt.
            log.info("run.paused", job_id=info.job_id, queue=message.queue_name)
            if not self._requeue(broker, message, PAUSED_REQUEUE_MS, attempt=None):
                raise TrackingDown("could not hand back a message of a paused queue")
            raise SkipMessage(info.job_id)
        spec = None
        if info.job_name in broker.actors:
            spec = broker.get_actor(info.job_name).options.get("job_spec")
        parsed, refusal, verified = (
            check_message(spec, message, info) if spec is not None else (None, None, True)
        )
        if not verified:
            # Its job id is not its payload's (or cannot be told): recording it under that id
            # would start, finish or skip another job's run. It is a run of its own.
            info = replace(info, job_id=f"raw:{info.job_name}:{info.message_id}")
            state.info = info
        policy = self.policy(broker, info.job_name, info.queue)
        self.gate.enter()
        state.gate = "shared"
        kept: _KeptStart | None = None
        try:
            started = self._keep_start(broker, message, info)
            if isinstance(started, Kept):
                kept = _KeptStart(
                    info, policy.max_attempts, message, time.time(), broker, started.created_on
                )
                started = Started(None, False, info.attempt, 1)
            else:
                seal = started is _SEAL
                if isinstance(started, PriorStart):
                    started = self._prior_start(info, policy, started)
                if started is None or seal:
                    started = self.writer.start_run(info, policy.max_attempts)
                if seal and isinstance(started, Started):
                    self._seal_soon(broker, info)
            if isinstance(started, Blocked):
                started = self._blocked(broker, message, state, info, policy, started)
        except RowRefused as exc:
            # Postgres refuses this run's row for what it holds: retrying cannot help, and
            # must not go on forever. Dead-letter the message (Redis keeps it) and go on.
            log.error("run.start_refused", job_id=info.job_id, error=exc.error)
            message.fail()
            raise SkipMessage(info.job_id) from exc
        except SkipMessage:
            raise
        except Exception as exc:
            log.error("run.start_not_recorded", job_id=info.job_id, error=str(exc))
            raise TrackingDown(str(exc)) from exc
        if started is None:
            log.info("run.skipped", job_id=info.job_id, reason="already finished or canceled")
            raise SkipMessage(info.job_id)
        if started.attempt != info.attempt:  # an interrupted execution counted as an attempt
            info = replace(info, attempt=started.attempt)
        if refusal is None and started.attempt > policy.max_attempts:
            # Redelivered by maintenance after its last attempt was interrupted (`STUCK`).
            refusal = Refused(
                f"attempts exhausted ({policy.max_attempts}/{policy.max_attempts}): the last "
                "one was interrupted (its worker died or stalled past its lease)",
                code="WORKER_CRASHED",
            )
        ctx = JobContext(
            job_id=info.job_id,
            job_name=info.job_name,
            queue=info.queue,
            org_id=info.org_id,
            attempt=info.attempt,
            max_attempts=policy.max_attempts,
            message_id=info.message_id,
            request_id=info.request_id,
            checkpoint=started.checkpoint,
            cancel_requested=started.cancel_requested,
            _write_progress=self.writer.progress if kept is None else self._progress,
            parsed=parsed,
        )
        state.info = info
        state.ctx = ctx
        state.started = time.monotonic()
        state.token = set_current_job(ctx)
        if kept is not None:
            kept.ctx = ctx
            with self._kept_changed:
                self._kept[info.job_id] = kept
        else:
            self._running[info.job_id] = ctx
            self._messages[info.job_id] = message
        if refusal is not None:  # recorded as started: the outcome makes it DEAD at once
            raise refusal

    def _blocked(
        self,
        broker: dramatiq.Broker,
        message: Any,
        state: Delivery,
        info: MessageInfo,
        policy: RetryPolicy,
        blocked: Blocked,
    ) -> Started | None:
        """The run is RUNNING. Under a live lease (another execution, here or elsewhere): this
        delivery is deferred until the lease would run out, not run, not an attempt. Its lease
        ran out (the worker that held it died or stalled): the interrupted execution counts as
        an attempt; after the last one the run is DEAD (`WORKER_CRASHED`), else it is taken
        over at once. It runs alone in this process when it may be what killed its worker
        (`must_run_alone`), so that a job that kills its process takes no neighbour down with it
        again; a stalled worker's runs are taken over together, in parallel."""
        if blocked.live:
            self._defer(broker, message, info, blocked.remaining_s)
        if blocked.attempt + 1 > policy.max_attempts:
            error = (
                f"attempts exhausted ({blocked.attempt}/{policy.max_attempts}): the worker "
                f"running it died or stalled past its lease in each of its {blocked.executions} "
                "execution(s) (a crash, OOM or kill of the process that ran it)"
            )
            self.writer.bury(info.job_id, "WORKER_CRASHED", error)
            log.error(
                "run.finished", job_id=info.job_id, status="DEAD", error_code="WORKER_CRASHED"
            )
            raise SkipMessage(info.job_id)
        alone = must_run_alone(blocked)
        if alone:
            self.gate.leave()
            state.gate = None
            if not self.gate.enter_solo(SOLO_WAIT_S):
                self._defer(broker, message, info, SOLO_RETRY_S)
            state.gate = "solo"
            # The runs that just finished here must be on the record before this one runs: if
            # it kills the process, their outcomes (still on their way to Postgres) would be
            # lost and they would count as interrupted too.
            for pending in list(self._outcomes):
                with contextlib.suppress(Exception):
                    pending.waiter.result(SOLO_WAIT_S)
        log.warning(
            "run.taken_over",
            job_id=info.job_id,
            interrupted_attempt=blocked.attempt,
            executions=blocked.executions,
            alone=alone,
        )
        taken = self.writer.takeover(info, policy.max_attempts)
        if isinstance(taken, Blocked):  # someone else took it over first
            self._defer(broker, message, info, taken.remaining_s)
        return taken

    # -- starts kept in Redis (broker/starts.py) -------------------------------------------

    def _keep_start(self, broker: dramatiq.Broker, message: Any, info: MessageInfo) -> Any:
        """Keep this run's start on its job id's key in Redis instead of writing it: a
        `Started` when kept; a `PriorStart` when an earlier delivery of this message (or a copy)
        started it; None or `_SEAL` when the run store must decide (a retry, a key gone, held
        by another message or not marked fresh, a message recovered after Redis lost its data,
        a broker without keys, kept starts turned off, a Redis error). `_SEAL`: the key may
        still let a later delivery keep a start, so it is marked once this one is written."""
        client = getattr(broker, "client", None)
        if (
            client is None
            or info.attempt != 1
            or message.options.get("recovered")
            or info.job_id.startswith("raw:")
        ):
            return None
        if self._starts is None:
            self._starts = RunStarts(broker.namespace)  # type: ignore[attr-defined]
        if not self._write_after_s:
            return _SEAL
        try:
            (claimed,) = self._starts.claim_many(
                client,
                [(info.job_id, info.message_id)],
                self.writer.owner,
                now_ms=int(time.time() * 1000),
                lease_ms=int(self.writer.lease_s * 1000),
            )
        except Exception as exc:
            log.warning("run.start_not_kept", job_id=info.job_id, error=str(exc)[:200])
            return _SEAL
        if isinstance(claimed, Kept):
            return claimed
        if claimed == info.message_id:
            # Not marked fresh (yet: its QUEUED row may be on its way): written at once, and
            # then said on the key, which its producer may mark fresh a moment later.
            return _SEAL
        return claimed if isinstance(claimed, PriorStart) else None

    def _seal(self, broker: Any, info: MessageInfo) -> None:
        """The key says this message's start is written (`RunStarts.written`), so that a later
        delivery of it asks the run store: its start was written at once while the key still
        held the bare message id (kept starts off, Redis did not answer the claim), or its
        kept start goes with an outcome after which the message comes back."""
        try:
            if self._starts is not None:
                self._starts.written(broker.client, info.job_id, info.message_id, self.writer.owner)
        except Exception as exc:
            log.warning("run.start_not_marked", job_id=info.job_id, error=str(exc)[:200])

    def _seal_soon(self, broker: Any, info: MessageInfo) -> None:
        """`_seal`, off the worker thread: the run is not held up by it (a delivery that
        needs it, this message's next one, comes after a heartbeat timeout at the earliest;
        one after a `RetryLater` finds the run QUEUED and may keep its start all the same)."""
        if self._sealer is None:
            with self._kept_changed:
                if self._sealer is None:
                    self._sealer = ThreadPoolExecutor(1, thread_name_prefix="jobfleet-seal")
        self._sealer.submit(self._seal, broker, info)

    def _prior_start(
        self, info: MessageInfo, policy: RetryPolicy, prior: PriorStart
    ) -> Blocked | None:
        """A delivery of this message (or of the one holding the job id: a copy) started the
        run and kept the start in Redis. Under a live lease it is in flight: a `Blocked`. Its
        lease over, that execution was interrupted (its worker died or stalled before writing
        anything): put on the record as such (this message's own), and the run store decides
        as for any start (None)."""
        remaining = prior.lease_until - time.time()
        if remaining > 0:
            return Blocked(True, remaining, 0, 0, prior.owner)
        if prior.message_id != info.message_id:
            return None  # a copy of the job: its own start is decided by the run store
        self.writer.submit_start(
            info,
            policy.max_attempts,
            started_at=prior.started_at,
            lease_until=prior.lease_until,
            owner=prior.owner,
            created_on=prior.created_on,
        ).result(30)
        log.warning("run.kept_start_interrupted", job_id=info.job_id, owner=prior.owner)
        return None

    def _progress(
        self, job_id: str, done: int, total: int, checkpoint: Any, timeout: float = 30
    ) -> bool | None:
        """A kept run reports progress: its start is written first (a checkpoint must belong
        to a run the store sees RUNNING); None when it was taken over meanwhile."""
        if not self._write_start(job_id, raise_errors=True):
            return None
        return self.writer.progress(job_id, done, total, checkpoint, timeout)

    def _write_due_starts(self) -> None:
        """Write the starts of the kept runs that outlived `_write_after_s`, so that the
        status API and the console see them RUNNING and their leases are renewed."""
        if not self._kept:
            return
        now = time.time()
        with self._kept_changed:
            due = [
                job_id
                for job_id, kept in self._kept.items()
                if kept.state == "kept" and now - kept.started_at >= self._write_after_s
            ]
        for job_id in due:
            self._write_start(job_id)

    def _write_start(self, job_id: str, *, raise_errors: bool = False) -> bool:
        """Write a kept run's start (`START_MANY` with the time it began); afterwards its
        lease is renewed like any run's. False when the run was taken over or finished
        meanwhile (the run is marked `lease_lost`) or the store did not answer (tried again
        at the next tick; with `raise_errors`, what it raised is raised, as a progress report
        raises it)."""
        with self._kept_changed:
            kept = self._kept.get(job_id)
            if kept is None:
                return True  # written already, or its outcome is on its way
            while kept.state == "writing":
                self._kept_changed.wait()
            if kept.state != "kept":
                return kept.state == "written"
            kept.state = "writing"
        try:
            started = self.writer.submit_start(
                kept.info, kept.max_attempts, started_at=kept.started_at, created_on=kept.created_on
            ).result(30)
        except Exception as exc:
            log.warning("run.start_not_recorded", job_id=job_id, error=str(exc)[:200])
            with self._kept_changed:
                kept.state = "kept"
                self._kept_changed.notify_all()
            if raise_errors:
                raise
            return False
        ctx = kept.ctx
        if isinstance(started, Started) and self._starts is not None:
            try:  # a later delivery asks the run store (whose lease is renewed) from now on
                self._starts.written(
                    kept.broker.client, job_id, kept.info.message_id, self.writer.owner
                )
            except Exception as exc:  # it then finds this start's lease run out: a no-op
                log.warning("run.start_not_marked", job_id=job_id, error=str(exc)[:200])
        with self._kept_changed:
            self._kept.pop(job_id, None)
            if isinstance(started, Started) and ctx is not None:
                kept.state = "written"
                ctx.cancel_requested = ctx.cancel_requested or started.cancel_requested
                self._running[job_id] = ctx
                self._messages[job_id] = kept.message
            else:
                kept.state = "lost"
                if ctx is not None:
                    ctx.lease_lost = True
                log.warning("run.lease_lost", job_id=job_id, reason="taken over before written")
            self._kept_changed.notify_all()
        return kept.state == "written"

    def _take_kept(self, job_id: str, ctx: JobContext) -> _KeptStart | None:
        """The kept start of a run whose handler ended, to be written with its outcome; None
        when its start is written already (or being written: waited for)."""
        if not self._kept:
            return None
        with self._kept_changed:
            kept = self._kept.get(job_id)
            if kept is None or kept.ctx is not ctx:
                return None
            while kept.state == "writing":
                self._kept_changed.wait()
            if kept.state != "kept":
                return None
            kept.state = "finishing"
            del self._kept[job_id]
            return kept

    def forget(self, ctx: JobContext) -> None:
        """Stop renewing the lease of a run whose outcome is recorded."""
        if self._running.get(ctx.job_id) is ctx:
            self._running.pop(ctx.job_id, None)
            self._messages.pop(ctx.job_id, None)
            self._settling.discard(ctx.job_id)

    def _defer(
        self, broker: dramatiq.Broker, message: Any, info: MessageInfo, delay_s: float
    ) -> NoReturn:
        delay_ms = int(max(delay_s, 0) * 1000) + DEFER_MARGIN_MS
        log.info("run.deferred", job_id=info.job_id, delay_ms=delay_ms, reason="run in flight")
        if not self._requeue(broker, message, delay_ms, attempt=None):
            raise TrackingDown("could not defer a delivery of a run in flight")
        raise SkipMessage(info.job_id)

    def _exit(self, message: Any) -> None:
        """Leave the process's gate (shared or solo) and the set of runs in flight."""
        state = delivery_of(message)
        ctx = state.ctx
        if ctx is not None:
            self._take_kept(ctx.job_id, ctx)  # a kept start its outcome did not take: dropped
        if ctx is not None and self._running.get(ctx.job_id) is ctx:
            if state.durable is not None:
                self._settling.add(ctx.job_id)  # renewed until `_PendingOutcome.wait` returns
            else:
                self.forget(ctx)
        held = state.gate
        state.gate = None
        if held == "shared":
            self.gate.leave()
        elif held == "solo":
            self.gate.leave_solo()

    def record_undecodable(self, queue: str, redis_id: str, data: bytes, error: Exception) -> None:
        """Record bytes that are no Dramatiq message as a DEAD run (`UNDECODABLE`), keyed by
        `raw:<queue>:<redis message id>`, with the bytes kept up to `RAW_KEPT_BYTES`; returns
        once the row is durable (the consumer then acknowledges the message). Raises when the
        run store cannot record it."""
        queue = queue.removesuffix(".DQ")
        info = MessageInfo(
            job_id=f"raw:{queue}:{redis_id}",
            job_name=UNDECODABLE_JOB,
            queue=queue,
            org_id=SYSTEM_ORG,
            attempt=1,
            message_id=redis_id,
            request_id=None,
            entity_type=None,
            entity_id=None,
            payload=raw_payload(redis_id, data),
            sent_at=None,
        )
        if not isinstance(self.writer.start_run(info, 1), Started):
            return  # recorded already (an earlier delivery whose ack was lost)
        detail = f"{type(error).__name__}: {error}"
        cause = error.__cause__ or error.__context__
        if cause is not None:
            detail += f" ({type(cause).__name__}: {str(cause)[:200]})"
        self.writer.finish_run(
            Finish(
                info.job_id,
                "DEAD",
                error_code="UNDECODABLE",
                error=f"not a Dramatiq message ({len(data)} bytes): {detail}"[:ERROR_MAX_CHARS],
            )
        )

    def after_skip_message(self, broker: dramatiq.Broker, message: Any) -> None:
        self._exit(message)
        delivery_of(message).outcome = Outcome("SKIPPED")

    def before_nack(self, broker: dramatiq.Broker, message: Any) -> None:
        """Record a message for an undeclared actor as a DEAD run (`UNKNOWN_JOB`).

        Dramatiq's consumer thread dead-letters such a message before any process hook runs,
        into Redis's `.XQ` set only: without this it would be invisible in the fleet's DLQ.
        """
        exc = failure_of(message)
        if delivery_of(message).ctx is not None or not isinstance(exc, ActorNotFound):
            return
        info = message_info(message)
        policy = self.policy(broker, info.job_name, info.queue)
        outcome = decide(attempt=info.attempt, policy=policy, exception=exc, rng=self.rng)
        code, error = outcome.error_code, outcome.error
        try:
            if isinstance(self.writer.start_run(info, policy.max_attempts), Started):
                self.writer.finish_run(Finish(info.job_id, "DEAD", error_code=code, error=error))
        except Exception as err:  # the message is in Redis's dead-letter set all the same
            log.critical("run.outcome_not_recorded", job_id=info.job_id, error=str(err))
            return
        log.error("run.finished", job_id=info.job_id, status=outcome.status, error_code=code)

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: Any,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        try:
            self._after_process(broker, message, result, exception)
        finally:  # once its outcome is on its way (`_PendingOutcome`), not before
            self._exit(message)

    def _after_process(
        self,
        broker: dramatiq.Broker,
        message: Any,
        result: Any,
        exception: BaseException | None,
    ) -> None:
        state = delivery_of(message)
        if state.token is not None:
            set_current_job(None)
        ctx = state.ctx
        if ctx is not None and (ctx.lease_lost or isinstance(exception, LeaseLost)):
            # Another execution took this run over while this process stalled: it owns the
            # outcome. Nothing is recorded or retried from here; this message is acknowledged.
            log.warning("run.execution_abandoned", job_id=ctx.job_id, reason="lease lost")
            state.outcome = Outcome("SKIPPED")
            return
        info = state.info
        if ctx is None or info is None:  # the start was not recorded (both are set with it)
            if isinstance(exception, TrackingDown):
                self._requeue(broker, message, TRACKING_DOWN_DELAY_MS, attempt=None)
            return
        if result is None:
            result = ctx.result
        policy = self.policy(broker, info.job_name, info.queue)
        outcome = decide(
            attempt=info.attempt,
            policy=policy,
            result=result,
            exception=exception,
            rng=self.rng,
            result_max_bytes=self.settings.result_max_bytes,
        )
        state.outcome = outcome
        kept = self._take_kept(info.job_id, ctx)
        if kept is not None and outcome.requeue_delay_ms is not None:
            # Its message comes back (a retry, `RetryLater`): its next delivery must ask the run
            # store, where this outcome goes, not take this start for an interrupted one.
            self._seal(broker, info)
        # Enqueue the retry before recording FAILED: a crash in between leaves a RUNNING row
        # with a pending retry (which will update it), never a FAILED row with none.
        if outcome.requeue_delay_ms is not None and not self._requeue(
            broker, message, outcome.requeue_delay_ms, attempt=outcome.next_attempt
        ):
            return
        finish = Finish(
            job_id=info.job_id,
            status=outcome.status,
            result=outcome.result,
            error_code=outcome.error_code,
            error=outcome.error,
            next_retry_at=outcome.next_retry_at(datetime.now(UTC)),
            start=None if kept is None else kept.row(self.writer),
        )
        if outcome.status == "CANCELED":
            self._release_job_id(broker, info.job_id)
        if finish.terminal and getattr(broker, "acker", None) is not None:
            # Don't hold the worker thread: the fleet consumer acks once this is durable.
            state.durable = _PendingOutcome(self, broker, message, finish)
        else:
            self._record(broker, message, finish)
        level = _LEVELS.get(outcome.status, 20)
        if outcome.status == "COMPLETED" and not self.settings.log_completed_runs:
            # Counted by the metrics and recorded in job_runs; a JSON line per job costs ~15 %
            # of a busy worker's time (bench/README.md). Failures always log.
            level = 10
        if not _stdlog.isEnabledFor(level):
            return  # not even the event: structlog would build it, then drop it
        log.log(
            level,
            "run.finished",
            status=outcome.status,
            error_code=outcome.error_code,
            error=(outcome.error or "").split("\n", 1)[0] or None,
            duration_ms=round((time.monotonic() - state.started) * 1000, 2),
        )

    def _record(
        self, broker: dramatiq.Broker, message: Any, finish: Finish, *, deferred: bool = False
    ) -> bool:
        """Make `finish` durable, retrying for `FINISH_PATIENCE_S`; if it cannot be, hand the
        message back rather than acknowledge an unrecorded run (at least once; handlers are
        idempotent). True when the message may be acknowledged."""
        deadline = time.monotonic() + FINISH_PATIENCE_S
        delay = 0.2
        while True:
            try:
                self.writer.finish_run(finish)
                return True
            except Exception as exc:
                if time.monotonic() + delay > deadline:
                    log.critical("run.outcome_not_recorded", job_id=finish.job_id, error=str(exc))
                    if finish.terminal:
                        return self._requeue(
                            broker,
                            message,
                            TRACKING_DOWN_DELAY_MS,
                            attempt=None,
                            hand_back=not deferred,
                        )
                    return True
                log.warning("run.outcome_retry", job_id=finish.job_id, error=str(exc))
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _release_job_id(self, broker: dramatiq.Broker, job_id: str) -> None:
        """A canceled job may be sent again (DESIGN §2): release its id in the gate."""
        try:
            broker.client.delete(dedup_key(broker.namespace, job_id))  # type: ignore[attr-defined]
        except Exception as exc:  # it expires with the dedup window all the same
            log.warning("run.job_id_not_released", job_id=job_id, error=str(exc))

    def _requeue(
        self,
        broker: dramatiq.Broker,
        message: Any,
        delay_ms: int,
        *,
        attempt: int | None,
        hand_back: bool = True,
    ) -> bool:
        options = {} if attempt is None else {"attempt": attempt}
        try:
            broker.enqueue(
                message_of(message).copy(options={**message.options, **options}), delay=delay_ms
            )
            return True
        except Exception as exc:
            # Not acknowledged: the consumer puts it back on its queue once Redis answers
            # (`Delivery.hand_back`). Nacked, it went to Redis's own dead-letter set, which
            # nothing of the fleet reads, while its run stayed RUNNING for good.
            log.critical(
                "run.requeue_failed",
                job_id=message.options.get("job_id"),
                error=str(exc),
                then="handed back to its queue once Redis answers" if hand_back else None,
            )
            if hand_back:
                delivery_of(message).hand_back = True
            return False


#: `_keep_start`: the start is written at once, then marked on the job id's key (`_seal`).
_SEAL = object()

#: A message of a paused queue goes back through the delay queue, into the (paused) queue.
PAUSED_REQUEUE_MS = 500


def must_run_alone(blocked: Blocked) -> bool:
    """Whether a run whose lease ran out may have killed the process that ran it, so that its
    new execution runs alone: it was interrupted more than once, or the worker that held its
    lease ran on this host and its process is gone (a crash, an OOM kill). A worker whose process
    still lives (frozen: SIGSTOP, swap, a long pause) or on another host (no way to tell a freeze
    from a crash there) has its runs taken over together; a job that does kill its process is
    then alone from its second interruption on."""
    if blocked.executions >= 2 or not blocked.owner:
        return True
    if blocked.owner == RELEASED:  # handed back at a shutdown: nothing crashed
        return False
    host, _, rest = blocked.owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return not _process_lives(int(pid))


def _process_lives(pid: int) -> bool:
    """Whether process `pid` exists and is no zombie (a stopped one lives)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


#: Longest a taken-over run waits for this process's other runs to finish before it runs alone.
SOLO_WAIT_S = 10.0
#: Then it is deferred for this long.
SOLO_RETRY_S = 2.0
#: Added to the rest of a live lease when a delivery is deferred.
DEFER_MARGIN_MS = 250


class SoloGate:
    """Runs of one process: any number together, or one alone. A run whose last execution was
    interrupted (its worker died) may be what killed it: it runs alone, and new runs of the
    process wait meanwhile (at most the time the solo run takes)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._running = 0
        self._solo = 0  # solo runs waiting or running
        self._solo_active = False

    def enter(self) -> None:
        with self._cond:
            while self._solo:
                self._cond.wait()
            self._running += 1

    def leave(self) -> None:
        with self._cond:
            self._running -= 1
            if self._solo and self._running == 0:
                self._cond.notify_all()

    def enter_solo(self, timeout: float) -> bool:
        with self._cond:
            self._solo += 1
            if self._cond.wait_for(lambda: self._running == 0 and not self._solo_active, timeout):
                self._solo_active = True
                return True
            self._solo -= 1
            self._cond.notify_all()
            return False

    def leave_solo(self) -> None:
        with self._cond:
            self._solo -= 1
            self._solo_active = False
            self._cond.notify_all()


class Refused(PermanentError, MiddlewareError, Retry):
    """A message refused before its handler runs (its shape, payload or job id). A
    `MiddlewareError`, or Dramatiq would swallow it and run the handler; a `Retry` only so
    that Dramatiq does not log a traceback for it: the run says it all."""


def check_message(
    spec: Any, message: Any, info: MessageInfo
) -> tuple[Any, PermanentError | None, bool]:
    """(the payload parsed and upgraded, a refusal or None, whether the message's job id may be
    used for its run). A message must carry its payload as its one positional argument, the
    payload must satisfy the job's contract, and an `options.job_id` must be the id the
    payload derives (computed on the payload at its own version, as its producer did, or at
    the newest); a job id that cannot be checked is not used."""
    claimed = message.options.get("job_id")
    trusted = not claimed or str(claimed).startswith("raw:")  # a raw id is keyed by message
    if len(message.args) != 1 or message.kwargs:
        error = Refused(
            f"{spec.name}: a message carries one positional payload argument and no keywords; "
            f"got {len(message.args)} argument(s) and keywords {sorted(message.kwargs)}",
            code="INVALID_PAYLOAD",
        )
        return None, error, trusted
    data = message.args[0]
    try:
        parsed, wire = spec.contract.parse_wire(data)
    except InvalidPayload as exc:
        return None, Refused(str(exc), code="INVALID_PAYLOAD"), trusted
    if trusted:
        return parsed, None, True
    derived = spec.job_id(parsed, wire)
    if derived != claimed:
        at_wire = _job_id_at_wire_version(spec, data)
        if at_wire != claimed:
            error = Refused(
                f"options.job_id {claimed!r} is not the job id its payload derives "
                f"({derived!r}): refused, the run of {claimed!r} is left as it is",
                code="JOB_ID_MISMATCH",
            )
            return None, error, False
    return parsed, None, True


def _job_id_at_wire_version(spec: Any, data: Any) -> str | None:
    """The job id of `data` validated at its own (older) version, as its producer derived it
    before a newer version shipped; None when it cannot be computed."""
    try:
        model = spec.contract.by_version[data["v"]].model_validate(data)
        return str(spec.job_id(model))
    except Exception:
        return None


#: The job name of a run recorded for bytes that are no Dramatiq message.
UNDECODABLE_JOB = "(undecodable)"
#: Most bytes of an undecodable message kept on its run.
RAW_KEPT_BYTES = 8_192


def raw_payload(redis_id: str, data: bytes) -> dict[str, Any]:
    """What a run keeps of an undecodable message: its bytes (as text when they are UTF-8
    that Postgres can store, else base64) up to `RAW_KEPT_BYTES`."""
    kept: dict[str, Any] = {
        "redis_message_id": redis_id,
        "size": len(data),
        "truncated": len(data) > RAW_KEPT_BYTES,
    }
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and "\x00" not in text:
        kept["raw"] = text[:RAW_KEPT_BYTES]
    else:
        kept["raw_base64"] = base64.b64encode(data[:RAW_KEPT_BYTES]).decode()
    return kept


class _PendingOutcome:
    """A terminal outcome handed to the durable lane; the fleet consumer's acker calls `wait`."""

    def __init__(
        self, tracking: Tracking, broker: dramatiq.Broker, message: Any, finish: Finish
    ) -> None:
        self.tracking = tracking
        self.broker = broker
        self.message = message
        self.finish = finish
        self.waiter = tracking.writer.submit_finish(finish)
        tracking._outcomes.add(self)

    def wait(self, timeout: float) -> bool:
        """True once the outcome is durable (or the message was handed back): ack it."""
        try:
            try:
                self.waiter.result(timeout)
                return True
            except Exception as exc:
                log.warning("run.outcome_retry", job_id=self.finish.job_id, error=str(exc))
            return self.tracking._record(self.broker, self.message, self.finish, deferred=True)
        finally:
            self.tracking._outcomes.discard(self)
            ctx = delivery_of(self.message).ctx
            if ctx is not None:
                self.tracking.forget(ctx)


EXPECTED_FAILURES = (PermanentError, AlreadyDone, RetryLater, LeaseLost)

_LEVELS = {"COMPLETED": 20, "FAILED": 30, "DEAD": 40, "CANCELED": 20, "QUEUED": 20}


@dataclass(slots=True, eq=False)
class _KeptStart:
    """A run started here whose start is kept in Redis (`Tracking._keep_start`). Its `state`:
    kept -> writing -> written (START_MANY, then renewed like any run) or lost (taken over);
    kept -> finishing (written with its outcome)."""

    info: MessageInfo
    max_attempts: int
    message: Any
    #: Epoch seconds.
    started_at: float
    broker: Any
    #: The day of its run's row (`created_on`): its writes find it in that partition.
    created_on: str
    ctx: JobContext | None = None
    state: str = "kept"

    def row(self, writer: RunWriter) -> dict[str, Any]:
        """Its START row, carried by the outcome (`Finish.start`)."""
        return writer.start_row(
            self.info, self.max_attempts, started_at=self.started_at, created_on=self.created_on
        )
