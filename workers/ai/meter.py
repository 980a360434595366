"""One metered provider call: per-org limits before, usage and cost after, logs without content.

The first call of a delivery that finds the org over its request rate is delayed (`RetryLater`,
not an attempt). A follow-up call of the same task (the extract repair) waits for a slot in
place instead: the first call is paid for, and redelivering would pay for it again.
Prompts and outputs reach the logs only with `AI_LOG_CONTENT=true` (a debug setting).
"""

from __future__ import annotations

import random
import time
from typing import Any

import structlog
from tenacity import Retrying, retry_if_result

from shared.errors import PermanentError, RetryLater

from . import usage
from .limits import QuotaExceeded, limits_for
from .provider import Completion, Embeddings, Message, Provider
from .store import TaskRow
from .wiring import Ai

log = structlog.get_logger("jobfleet.ai")

#: Rough characters per token of the pre-call estimate (the reservation is settled to the
#: provider's count afterwards; erring high only delays a call near the daily cap).
CHARS_PER_TOKEN = 3


class Meter:
    """The calls of one task delivery, against one org's limits."""

    def __init__(self, ai: Ai, row: TaskRow, *, rng: random.Random | None = None) -> None:
        self.ai = ai
        self.row = row
        self.limits = limits_for(ai.settings, row.org_id)
        self.calls = 0
        self.rng = rng or random.Random()

    def chat(
        self,
        provider: Provider,
        messages: list[Message],
        *,
        model: str,
        max_tokens: int,
        json_mode: bool,
    ) -> Completion:
        estimate = (
            sum(len(m.content) for m in messages) // CHARS_PER_TOKEN
            + 4 * len(messages)
            + max_tokens
        )
        reservation = self._admit(estimate)
        t0 = time.perf_counter()
        try:
            result = provider.chat(
                messages, model=model, max_tokens=max_tokens, json_mode=json_mode
            )
        except BaseException as exc:
            self._failed(reservation, model, exc)
            raise
        self._record(
            reservation,
            result.model,
            result.tokens_in,
            result.tokens_out,
            t0,
            provider,
            content={"prompt": [m.content for m in messages], "output": result.text},
        )
        return result

    def embed(self, provider: Provider, texts: list[str], *, model: str) -> Embeddings:
        reservation = self._admit(sum(len(t) for t in texts) // CHARS_PER_TOKEN + 2 * len(texts))
        t0 = time.perf_counter()
        try:
            result = provider.embed(texts, model=model)
        except BaseException as exc:
            self._failed(reservation, model, exc)
            raise
        self._record(
            reservation, result.model, result.tokens_in, 0, t0, provider, content={"input": texts}
        )
        return result

    # -- limits ------------------------------------------------------------------------------

    def _admit(self, estimate: int) -> Any:
        org = self.row.org_id
        # Until a request slot is free: a follow-up call sleeps the wait Redis answers.
        slot = Retrying(
            retry=retry_if_result(bool),
            wait=lambda state: state.outcome.result() / 1000 if state.outcome else 0,
            sleep=self.ai.sleep,
        )
        slot(self._request_slot)
        try:
            reservation = self.ai.limiter.reserve_tokens(
                org, self.ai.clock().date(), estimate, self.limits
            )
        except QuotaExceeded as exc:
            usage.REQUESTS.labels(str(org), "-", "quota_exceeded").inc()
            raise PermanentError(
                f"org {org}: daily AI token quota exceeded ({exc})", code="QUOTA_EXCEEDED"
            ) from None
        self.calls += 1
        return reservation

    def _request_slot(self) -> int:
        """0 once a slot is taken, else the milliseconds to wait; over the rate on the first
        call of the delivery, `RetryLater` (a delayed job) instead."""
        org = self.row.org_id
        wait_ms = self.ai.limiter.acquire_request(org, self.limits)
        if wait_ms and self.calls == 0:
            usage.REQUESTS.labels(str(org), "-", "rate_limited").inc()
            delay = wait_ms + int(self.rng.uniform(0, min(1_000, self.limits.window_ms / 10)))
            raise RetryLater(
                f"org {org} is over {self.limits.requests_per_window} AI requests per "
                f"{self.limits.window_ms} ms",
                delay_ms=delay,
            )
        return wait_ms

    def _failed(self, reservation: Any, model: str, exc: BaseException) -> None:
        self.ai.limiter.settle(reservation, 0)
        usage.REQUESTS.labels(str(self.row.org_id), model, "error").inc()
        log.warning(
            "ai.call_failed",
            task_id=str(self.row.id),
            task=self.row.task,
            model=model,
            error_type=type(exc).__name__,
            error=str(exc)[:300],
        )

    # -- accounting --------------------------------------------------------------------------

    def _record(
        self,
        reservation: Any,
        model: str,
        tokens_in: int,
        tokens_out: int,
        t0: float,
        provider: Provider,
        *,
        content: dict[str, Any],
    ) -> None:
        duration_ms = round((time.perf_counter() - t0) * 1000, 1)
        cost = usage.price(self.ai.settings.prices, model, tokens_in, tokens_out)
        spent = usage.Usage(model=model, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost)
        day = self.ai.clock().date()
        try:
            # Committed without waiting for the WAL flush: the task's final (synchronous)
            # commit, or any later one, flushes it too; only a Postgres crash in between
            # could lose it, and then the claim is lost as well and the task runs again.
            with self.ai.pool.connection() as conn:
                usage.record(
                    conn, task_id=self.row.id, org_id=self.row.org_id, day=day, usage=spent
                )
        finally:
            self.ai.limiter.settle(reservation, spent.tokens)
        usage.count(self.row.org_id, spent)
        fields: dict[str, Any] = {
            "task_id": str(self.row.id), "task": self.row.task, "provider": provider.name,
            "model": model, "tokens_in": tokens_in, "tokens_out": tokens_out,
            "cost": str(cost), "duration_ms": duration_ms,
        }  # fmt: skip
        if self.ai.settings.log_content:
            fields.update(content)
        log.info("ai.call", **fields)
