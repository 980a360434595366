"""The provider port: what the AI tasks need from a model, whatever serves it.

Implementations live in `providers/` (an OpenAI-compatible HTTP API; a local embedding model).
Every call reports the tokens it used, as the provider counted them, so cost accounting never
guesses. Failures are mapped onto three kinds the task runner understands:

- `ProviderRejected` (permanent): the request itself is wrong (4xx other than 408/409/429) —
  retrying would fail the same way and cost the same; the provider's message is kept.
- `ProviderThrottled`: 429, or 5xx that says when to come back (`Retry-After`).
- `ProviderUnavailable` / `ProviderTimeout`: 5xx without `Retry-After`, connection errors,
  timeouts — retried on the ai queue's policy (attempts are counted).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from shared.errors import FleetError, PermanentError


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant
    content: str


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    tokens_in: int
    tokens_out: int
    finish_reason: str | None = None


@dataclass(frozen=True)
class Embeddings:
    vectors: list[list[float]]
    model: str
    tokens_in: int
    extra: dict[str, Any] = field(default_factory=dict)


class Provider(ABC):
    #: Short name stored on the task (`openai`, `local`).
    name: str = "provider"

    def chat(
        self,
        messages: list[Message],
        *,
        model: str,
        max_tokens: int,
        json_mode: bool = False,
        temperature: float = 0.0,
    ) -> Completion:
        raise ProviderRejected(f"{self.name} does not serve chat completions", status=None)

    @abstractmethod
    def embed(self, texts: list[str], *, model: str) -> Embeddings: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (HTTP pools); a no-op by default."""


# -- Failures --------------------------------------------------------------------------------


class ProviderRejected(PermanentError):
    """The AI provider rejected the request."""

    code = "PROVIDER_REJECTED"

    def __init__(self, message: str, *, status: int | None) -> None:
        super().__init__(message)
        self.status = status


class ProviderThrottled(FleetError):
    """The AI provider asked us to come back later."""

    code = "PROVIDER_THROTTLED"

    def __init__(self, message: str, *, status: int, retry_after_s: float | None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class ProviderUnavailable(FleetError):
    """The AI provider failed or could not be reached."""

    code = "PROVIDER_UNAVAILABLE"


class ProviderTimeout(ProviderUnavailable):
    """The AI provider did not answer in time."""

    code = "PROVIDER_TIMEOUT"
