"""The composition root of the ai domain: the collaborators its functions take, built once per
process on first use (never at import time); tests install their own with `set_ai`.

`Ai.settings` are the domain's (`AiSettings`, `AI_*`); the kernel's (Redis, the broker's
namespace) only serve to build the limiter here."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.runtime import Runtime, get_runtime

from .limits import Limiter
from .provider import Provider
from .settings import AiSettings, ai_settings

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Ai:
    settings: AiSettings
    pool: ConnectionPool
    limiter: Limiter
    clock: Callable[[], datetime] = utcnow
    sleep: Callable[[float], None] = time.sleep
    #: Provider overrides by name (`openai`, `local`); tests and benchmarks pass their own.
    providers: dict[str, Provider] = field(default_factory=dict)

    def provider(self, name: str) -> Provider:
        if name not in self.providers:
            with _lock:
                if name not in self.providers:
                    self.providers[name] = self._build(name)
        return self.providers[name]

    def _build(self, name: str) -> Provider:
        s = self.settings
        if name == "openai":
            from .providers.openai_compat import OpenAICompatProvider

            return OpenAICompatProvider(
                s.base_url,
                api_key=s.api_key.get_secret_value() if s.api_key else None,
                connect_timeout_s=s.connect_timeout_s,
                read_timeout_s=s.read_timeout_s,
            )
        if name == "local":
            from .providers.local_embed import LocalEmbedProvider

            directory = s.local_embed_model_dir
            return LocalEmbedProvider(Path(directory) if directory else None)
        raise ValueError(f"unknown AI provider {name!r}")

    def close(self) -> None:
        for provider in self.providers.values():
            provider.close()


def build_ai(runtime: Runtime, **overrides: Any) -> Ai:
    """The domain's collaborators on `runtime` (its pool and Redis); `settings` default to the
    process's `AiSettings`."""
    from shared import redis_conn

    from . import usage

    kernel = runtime.settings
    pool = overrides.pop("pool", None) or runtime.pool

    def seed(org_id: Any, day: Any) -> int:
        with pool.connection() as conn:
            return usage.tokens_on(conn, org_id, day)

    client = redis_conn.client(kernel, socket_timeout=5, socket_connect_timeout=5)
    parts: dict[str, Any] = {
        "settings": ai_settings(),
        "pool": pool,
        "limiter": Limiter(client, kernel.broker_namespace, seed),
    }
    parts.update(overrides)
    return Ai(**parts)


_lock = threading.RLock()
_ai: Ai | None = None


def get_ai() -> Ai:
    global _ai
    if _ai is None:
        with _lock:
            if _ai is None:
                _ai = build_ai(get_runtime())
    return _ai


def set_ai(ai: Ai | None) -> Ai | None:
    global _ai
    with _lock:
        previous, _ai = _ai, ai
    return previous
