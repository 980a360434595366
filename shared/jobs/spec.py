"""`JobSpec`: a job declared in the kernel (name, queue, contract, policy) that any producer can
send without importing the worker that implements it; the worker binds its handler to it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..config import RetryPolicy
from ..contracts.base import Contract, Payload
from ..runtime import get_runtime
from .ids import stable_job_id
from .priorities import Priority, check_priority
from .requires import Requires

if TYPE_CHECKING:
    from .send import SendResult

P = TypeVar("P", bound=Payload)


def _entity_id(payload: Payload) -> str:
    return str(getattr(payload, "entity_id", "") or getattr(payload, "slot", "") or "")


@dataclass(frozen=True)
class JobSpec(Generic[P]):
    contract: Contract[P]
    queue: str
    entity_type: str | None = None
    #: A custom job id (a callable of the payload); the default is DESIGN §2's stable id. An
    #: `id_rule()` method on it says how the id is made, for producers in other languages.
    custom_id: Callable[[P], str] | None = None
    #: Time limit of one attempt; None takes `default_time_limit_ms`.
    time_limit_ms: int | None = None
    #: Overrides the queue's retry policy from settings.
    retry: RetryPolicy | None = None
    #: A row the worker needs and cannot create from the payload: checked at send.
    requires: Requires | None = None
    #: Its priority in its queue, fleet-wide (high, default, low; a send may name another):
    #: docs/kernel.md, "Fair share, limits and priorities".
    priority: Priority = "default"

    def __post_init__(self) -> None:
        check_priority(self.priority)

    @property
    def name(self) -> str:
        return self.contract.job_name

    def id_rule(self) -> dict[str, Any]:
        """How this job's id is derived, for producers in other languages (index.json;
        docs/wire-protocol.md §1): a hash of `hashed` fields (None: every field but `v`) with
        `entity` in the id, or the custom rule's own description (`custom_id.id_rule()`)."""
        if self.custom_id is not None:
            describe = getattr(self.custom_id, "id_rule", None)
            return dict(describe()) if callable(describe) else {"form": "custom"}
        latest = self.contract.latest
        fields = latest.model_fields
        return {
            "form": "hash",
            "entity": "entity_id" if "entity_id" in fields else "slot",
            "hashed": list(latest.stable_fields) if latest.stable_fields else None,
        }

    def build(self, payload: P | Mapping[str, Any]) -> P:
        return self.contract.build(payload)

    def entity_id(self, payload: P) -> str:
        return _entity_id(payload)

    def job_id(
        self, payload: P, wire: Mapping[str, Any] | None = None, *, entity_id: str | None = None
    ) -> str:
        """`wire`: the payload's `wire()`, `entity_id`: its `entity_id(payload)`, when the
        caller has them (`Contract.build_wire`, `Sender.send`)."""
        if self.custom_id is not None:
            return self.custom_id(payload)
        if entity_id is None:
            entity_id = self.entity_id(payload)
        # The org id as the wire writes it (`str(UUID)`, as the f-string would): made once.
        org_id = payload.org_id if wire is None else wire.get("org_id", payload.org_id)
        return stable_job_id(org_id, self.name, entity_id, payload.stable_part(wire))

    def send(
        self,
        payload: P | Mapping[str, Any],
        *,
        request_id: str | None = None,
        delay_ms: int | None = None,
        priority: Priority | None = None,
    ) -> SendResult:
        """Validate, derive the job id, deduplicate, record QUEUED and enqueue (with `priority`,
        or the job's own)."""
        return get_runtime().sender.send(
            self, payload, request_id=request_id, delay_ms=delay_ms, priority=priority
        )

    def __hash__(self) -> int:  # a job is its name (usable as a mapping key: `{SPEC: handler}`)
        return hash(self.name)

    def __repr__(self) -> str:
        return f"JobSpec({self.name!r}, queue={self.queue!r})"
