"""An OpenAI-compatible HTTP API: OpenAI, vLLM, Ollama (`/v1`), llama.cpp's server.

Wire format: `POST {base}/chat/completions` and `POST {base}/embeddings`, bearer key, JSON;
token counts from the response's `usage`. One `httpx.Client` per process (its connection pool
is shared by the worker's threads), with separate connect and read timeouts.
"""

from __future__ import annotations

import email.utils
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from ..provider import (
    Completion,
    Embeddings,
    Message,
    Provider,
    ProviderRejected,
    ProviderThrottled,
    ProviderTimeout,
    ProviderUnavailable,
)

#: 4xx that are about timing or contention rather than the request: retried like a 5xx.
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
#: Longest provider error text kept (it ends up in the run's error and the DLQ view).
ERROR_TEXT_MAX = 500


class OpenAICompatProvider(Provider):
    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        connect_timeout_s: float,
        read_timeout_s: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Accept": "application/json", "User-Agent": "jobfleet-ai/1"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        timeout = httpx.Timeout(
            connect=connect_timeout_s,
            read=read_timeout_s,
            write=read_timeout_s,
            pool=connect_timeout_s,
        )
        self.client = httpx.Client(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            timeout=timeout,
            transport=transport,
        )

    def chat(
        self,
        messages: list[Message],
        *,
        model: str,
        max_tokens: int,
        json_mode: bool = False,
        temperature: float = 0.0,
    ) -> Completion:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        data = self._post("chat/completions", body)
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
            usage = data.get("usage") or {}
            return Completion(
                text=str(text),
                model=str(data.get("model") or model),
                tokens_in=int(usage.get("prompt_tokens") or 0),
                tokens_out=int(usage.get("completion_tokens") or 0),
                finish_reason=choice.get("finish_reason"),
            )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ProviderUnavailable(
                f"malformed chat completion from the provider: {exc!r}"
            ) from None

    def embed(self, texts: list[str], *, model: str) -> Embeddings:
        data = self._post("embeddings", {"model": model, "input": texts})
        try:
            items = sorted(data["data"], key=lambda item: int(item.get("index", 0)))
            vectors = [[float(x) for x in item["embedding"]] for item in items]
            usage = data.get("usage") or {}
            tokens = int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderUnavailable(f"malformed embeddings from the provider: {exc!r}") from None
        if len(vectors) != len(texts):
            raise ProviderUnavailable(
                f"provider returned {len(vectors)} embeddings for {len(texts)} inputs"
            )
        return Embeddings(vectors=vectors, model=str(data.get("model") or model), tokens_in=tokens)

    def close(self) -> None:
        self.client.close()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.client.post(path, json=body)
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(f"{type(exc).__name__} calling {path}") from None
        except httpx.TransportError as exc:
            raise ProviderUnavailable(f"{type(exc).__name__} calling {path}: {exc}") from None
        status = response.status_code
        if status >= 400:
            raise classify_error(status, _error_text(response), response.headers.get("Retry-After"))
        try:
            data = response.json()
        except ValueError:
            raise ProviderUnavailable(
                f"provider answered {status} with a body that is not JSON"
            ) from None
        if not isinstance(data, dict):
            raise ProviderUnavailable(
                f"provider answered {status} with a JSON {type(data).__name__}"
            )
        return data


def classify_error(status: int, text: str, retry_after: str | None) -> Exception:
    """The failure kind of an HTTP error status (see the provider port)."""
    message = f"provider answered {status}: {text}"
    delay = parse_retry_after(retry_after)
    if status == 429 or (status >= 500 and delay is not None):
        return ProviderThrottled(message, status=status, retry_after_s=delay)
    if status >= 500 or status in RETRYABLE_4XX:
        return ProviderUnavailable(message)
    return ProviderRejected(message, status=status)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.fromtimestamp(now if now is not None else time.time(), UTC)
    return max(0.0, (when - current).total_seconds())


def _error_text(response: httpx.Response) -> str:
    """The provider's own message (`{"error": {"message": ...}}`), else the start of the body."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:ERROR_TEXT_MAX].strip() or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:ERROR_TEXT_MAX]
        if isinstance(error, str):
            return error[:ERROR_TEXT_MAX]
        if data.get("message"):
            return str(data["message"])[:ERROR_TEXT_MAX]
    return response.text[:ERROR_TEXT_MAX]
