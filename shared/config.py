"""Process settings, read from the environment (and `.env`) once per process.

Every setting has a default that works on a developer machine; production wiring is env vars
only. The README's configuration table is generated from this class (`fleet config`).
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class RetryPolicy(BaseModel):
    """Attempts = first try + retries; exponential backoff with full jitter, capped."""

    model_config = {"frozen": True}

    max_attempts: int = Field(ge=1)
    min_backoff_ms: int = Field(ge=0)
    max_backoff_ms: int = Field(default=300_000, ge=0)


#: DESIGN §3: retries per domain queue.
DEFAULT_RETRIES: dict[str, RetryPolicy] = {
    "email": RetryPolicy(max_attempts=3, min_backoff_ms=2_000),
    "ai": RetryPolicy(max_attempts=2, min_backoff_ms=5_000),
    "export": RetryPolicy(max_attempts=3, min_backoff_ms=5_000),
    "doc": RetryPolicy(max_attempts=5, min_backoff_ms=3_000),
    "chain-actions": RetryPolicy(max_attempts=5, min_backoff_ms=1_000),
}
FALLBACK_RETRY = RetryPolicy(max_attempts=5, min_backoff_ms=3_000)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description="Redis for the broker, locks and rate limits")
    database_url: str = Field(
        default="postgresql+psycopg://postgres@127.0.0.1:5432/jobfleet",
        description="Postgres, the system of record (SQLAlchemy URL, psycopg 3 driver)",
    )
    broker_namespace: str = Field(default="dramatiq", description="Redis key prefix of the broker")
    heartbeat_timeout_ms: int = Field(
        default=5_000, description="A worker silent this long is dead; its messages are requeued"
    )
    heartbeat_interval_ms: int = Field(default=1_000, description="Heartbeat and queue maintenance period")
    worker_idle_timeout_ms: int = Field(default=50, description="Longest idle poll back-off (wake-up latency)")
    shutdown_grace_ms: int = Field(default=30_000, description="SIGTERM: time in-flight jobs get to finish")
    retries: dict[str, RetryPolicy] = Field(
        default_factory=lambda: dict(DEFAULT_RETRIES),
        description="Retry policy per queue (JSON: {queue: {max_attempts, min_backoff_ms, max_backoff_ms}})",
    )
    default_time_limit_ms: int = Field(default=600_000, description="Time limit of a job without its own")
    run_retention_days: int = Field(default=30, description="Finished runs kept this long (dedup window)")
    result_max_bytes: int = Field(default=8_192, description="Largest job result stored on the run")
    tracking_batch_max: int = Field(default=256, description="Most run writes in one group commit")
    outbox_backoff_s: list[int] = Field(
        default_factory=lambda: [60, 300, 1_800, 7_200, 43_200, 86_400],
        description="Outbox publish retry schedule in seconds; its length is the attempt limit",
    )
    outbox_batch: int = Field(default=100, description="Events claimed per relay pass")
    log_level: str = Field(default="INFO", description="Log level of every process")
    log_format: str = Field(default="json", description="json (production) or console (humans)")
    health_host: str = Field(default="127.0.0.1", description="Bind address of /health and /metrics")
    health_port: int = Field(default=0, description="Port of /health and /metrics (0: off unless set by the launcher)")
    metrics_token: str | None = Field(default=None, description="Bearer token required on /metrics when set")
    prometheus_multiproc_dir: str | None = Field(
        default=None, description="Shared directory for multi-process metrics"
    )
    var_dir: str = Field(default="var", description="Local state of `make run`: embedded services, logs, mail, storage")

    # --- launcher and scheduler process (`make run`, `python -m scheduler`) ---
    health_base_port: int = Field(
        default=9101, description="First /health port `make run` gives its processes (one each, in table order)"
    )
    launcher_ready_timeout_s: float = Field(
        default=60.0, description="How long `make run` waits for every process to answer /health/ready"
    )
    outbox_relay_interval_ms: int = Field(default=1_000, description="Period of the scheduler's outbox relay pass")
    scheduler_threads: int = Field(default=4, description="Size of the scheduler's one thread pool")

    def retry_policy(self, queue: str) -> RetryPolicy:
        return self.retries.get(queue) or DEFAULT_RETRIES.get(queue) or FALLBACK_RETRY

    @property
    def database_dsn(self) -> str:
        """The libpq form of `database_url` (for psycopg without SQLAlchemy)."""
        return self.database_url.replace("postgresql+psycopg://", "postgresql://", 1)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
