"""Process settings, read from the environment (and `.env`) once per process.

Every setting has a default that works on a developer machine; production wiring is env vars
only. `Settings` holds the kernel's; each domain has its own class (a `DomainSettings` with its
own env prefix, listed in its registration), read once per process with `settings_for(cls)`.
The README's configuration table is generated from all of them (`fleet config`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

from pydantic import BaseModel, BeforeValidator, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def listed(value: object) -> object:
    """A list setting from the environment: comma-separated (`a,b`) or a JSON list (`["a","b"]`);
    an empty string is the empty list. Other values (a list given in code) pass unchanged."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        import json

        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValueError(
                f"not a JSON list ({exc}); or write the items comma-separated"
            ) from None
    return [part.strip() for part in text.split(",") if part.strip()]


#: List-valued settings: every one reads `a,b` and `["a","b"]` alike (pydantic-settings alone
#: decodes a list as JSON only, so the documented comma-separated form stopped a process).
StrList = Annotated[list[str], NoDecode, BeforeValidator(listed)]
IntList = Annotated[list[int], NoDecode, BeforeValidator(listed)]
UuidList = Annotated[list[UUID], NoDecode, BeforeValidator(listed)]


class RetryPolicy(BaseModel):
    """Attempts = first try + retries; exponential backoff with full jitter, capped."""

    model_config = {"frozen": True}

    max_attempts: int = Field(ge=1)
    min_backoff_ms: int = Field(ge=0)
    max_backoff_ms: int = Field(default=300_000, ge=0)


def default_retries() -> dict[str, RetryPolicy]:
    """DESIGN §3: the retry policy of each domain's queues, as their registrations declare it."""
    from .domains import retry_defaults

    return {queue: RetryPolicy(**policy) for queue, policy in retry_defaults().items()}


@lru_cache(maxsize=1)
def _registered_retries() -> dict[str, RetryPolicy]:
    return default_retries()


FALLBACK_RETRY = RetryPolicy(max_attempts=5, min_backoff_ms=3_000)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Redis for the broker, locks and rate limits",
    )
    database_url: str = Field(
        default="postgresql+psycopg://postgres@127.0.0.1:5432/jobfleet",
        description="Postgres, the system of record (SQLAlchemy URL, psycopg 3 driver)",
    )
    database_pooler: Literal["none", "transaction"] = Field(
        default="none",
        description="`transaction`: DATABASE_URL is a PgBouncer in transaction pooling mode "
        "(no prepared statements, no session SET or startup options, outbox relay polls "
        "instead of LISTEN; docs/scaling.md)",
    )
    db_pool_size: int | None = Field(
        default=None,
        ge=1,
        description="Most connections of a process's Postgres pool (its run writer holds 2 more); "
        "default by process kind: worker 10 (8 threads + 2), scheduler 6, any other (API, "
        "console, CLI) 8. `fleet status` shows the connections in use against max_connections",
    )
    redis_sentinels: str = Field(
        default="",
        description="Redis Sentinels `host:port,host:port,...`: the master they name replaces "
        "REDIS_URL's host and port (its password, db and rediss:// TLS options still apply)",
    )
    redis_sentinel_master: str = Field(
        default="mymaster", description="Name of the master the Sentinels monitor"
    )
    redis_sentinel_username: str | None = Field(
        default=None, description="Username of the Sentinels themselves (ACL)"
    )
    redis_sentinel_password: SecretStr | None = Field(
        default=None, description="Password of the Sentinels themselves (`requirepass`)"
    )
    redis_sentinel_tls: bool = Field(default=False, description="Talk TLS to the Sentinels")
    redis_queue_urls: dict[str, str] = Field(
        default_factory=dict,
        description="Queues on Redis primaries of their own (JSON {queue: redis URL}); a queue "
        "not listed is on REDIS_URL. Every process of the fleet needs the same value "
        "(docs/scaling.md)",
    )
    redis_queue_sentinel_masters: dict[str, str] = Field(
        default_factory=dict,
        description="With REDIS_SENTINELS: the master serving each queue of REDIS_QUEUE_URLS "
        "(JSON {queue: master name}); the queue's URL gives its password, db and TLS",
    )
    broker_namespace: str = Field(default="dramatiq", description="Redis key prefix of the broker")
    heartbeat_timeout_ms: int = Field(
        default=5_000, description="A worker silent this long is dead; its messages are requeued"
    )
    heartbeat_interval_ms: int = Field(
        default=1_000, description="Heartbeat and queue maintenance period"
    )
    worker_idle_timeout_ms: int = Field(
        default=50, description="Longest idle poll back-off (wake-up latency)"
    )
    shutdown_grace_ms: int = Field(
        default=30_000, description="SIGTERM: time in-flight jobs get to finish"
    )
    retries: dict[str, RetryPolicy] = Field(
        default_factory=default_retries,
        description="Retry policy per queue (JSON: {queue: {max_attempts, min_backoff_ms, max_backoff_ms}})",
    )
    org_concurrency: dict[str, int] = Field(
        default_factory=dict,
        description="Most running jobs of one org per queue, fleet-wide (JSON: {queue: n}; "
        "`fleet queues limit QUEUE --per-org N` overrides it)",
    )
    org_concurrency_overrides: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="Per-org exceptions to ORG_CONCURRENCY (JSON: {queue: {org id: n}})",
    )
    default_time_limit_ms: int = Field(
        default=600_000, description="Time limit of a job without its own"
    )
    run_retention_days: int = Field(default=30, description="Finished runs kept this long")
    # Sized for producer retries, not for the retention: the keys of a day of sends stay a day
    # (248 B each: ~24 GiB of Redis at 100 M jobs/day instead of ~710 GiB for 30 days). A job id
    # sent again later is still run once: its run row answers at the worker (docs/scaling.md).
    dedup_window_s: int = Field(
        default=86_400,
        ge=1,
        description="How long a sent job id stays taken in Redis (a repeat send within it "
        "enqueues nothing); size it for producers' retries: memory grows with it",
    )
    result_max_bytes: int = Field(default=8_192, description="Largest job result stored on the run")
    tracking_batch_max: int = Field(
        default=256,
        description="Most run writes in one group commit, and most finished messages a worker "
        "process holds while their outcomes are made durable (past it, it stops fetching)",
    )
    tracking_finish_linger_ms: float = Field(
        default=10,
        ge=0,
        description="How long a worker lets finished runs gather before making their outcomes "
        "durable in one commit (each is acknowledged that much later); 0: at once",
    )
    tracking_start_linger_ms: float = Field(
        default=1,
        ge=0,
        description="While a worker's run writer is busy, how long a start waits for other "
        "threads' starts to share its statement (an idle worker's start never waits); 0: never",
    )
    tracking_start_write_after_ms: float = Field(
        default=1_000,
        ge=0,
        description="A run's start is kept in Redis and written with its outcome (one write per "
        "short job); a run that lasts longer is written RUNNING after this long; 0: every start "
        "is written before its handler runs",
    )
    outbox_backoff_s: IntList = Field(
        default_factory=lambda: [60, 300, 1_800, 7_200, 43_200, 86_400],
        description="Outbox publish retry schedule in seconds (comma-separated); its length is "
        "the attempt limit",
    )
    outbox_batch: int = Field(default=100, description="Events claimed per relay pass")
    log_level: str = Field(default="INFO", description="Log level of every process")
    log_format: str = Field(default="json", description="json (production) or console (humans)")
    log_completed_runs: bool = Field(
        default=False,
        description="Log a line per completed run (INFO); off: DEBUG (metrics and job_runs have them)",
    )
    health_host: str = Field(
        default="127.0.0.1", description="Bind address of /health and /metrics"
    )
    health_port: int = Field(
        default=0, description="Port of /health and /metrics (0: off unless set by the launcher)"
    )
    metrics_token: str | None = Field(
        default=None, description="Bearer token required on /metrics when set"
    )
    job_api_token: str | None = Field(
        default=None,
        description="Bearer token of the standalone job-status API (`shared.api.service`); "
        "it does not start without one",
    )
    prometheus_multiproc_dir: str | None = Field(
        default=None, description="Shared directory for multi-process metrics"
    )
    var_dir: str = Field(
        default="var",
        description="Local state of `make run`: embedded services, logs, mail, storage",
    )

    # --- launcher (`make run`) ---
    health_base_port: int = Field(
        default=9101,
        description="First /health port `make run` gives its processes (one each, in table order)",
    )
    launcher_ready_timeout_s: float = Field(
        default=60.0,
        description="How long `make run` waits for every process to answer /health/ready",
    )

    # --- storage port (shared/storage): where artefacts and uploads live ---
    storage_backend: str = Field(
        default="local",
        pattern="^(local|s3)$",
        description="Where artefacts go: local (var/storage) or s3 (S3, R2, MinIO)",
    )
    storage_local_root: str | None = Field(
        default=None, description="Root of the local backend (default: VAR_DIR/storage)"
    )
    storage_bucket: str = Field(
        default="jobfleet", description="Bucket of the artefacts (local: a top directory)"
    )
    storage_signing_key: SecretStr | None = Field(
        default=None,
        description="HMAC key of local signed links (default: a random key kept under the local root)",
    )
    storage_link_base_url: str = Field(
        default="http://127.0.0.1:9180/files",
        description="Base URL of local signed links (`fleet export serve-links`)",
    )
    storage_url_ttl_s: int = Field(
        default=900, ge=1, le=604_800, description="Lifetime of presigned and signed links"
    )
    storage_part_size_mb: int = Field(
        default=8, ge=5, le=5_000, description="S3 multipart part size (and single-PUT limit)"
    )
    storage_s3_endpoint_url: str | None = Field(
        default=None, description="S3-compatible endpoint (R2, MinIO); None: AWS"
    )
    storage_s3_region: str = Field(default="us-east-1", description="S3 region (R2: auto)")
    storage_s3_access_key_id: str | None = Field(
        default=None, description="S3 access key id (None: boto3's chain)"
    )
    storage_s3_secret_access_key: SecretStr | None = Field(
        default=None, description="S3 secret key; never logged"
    )
    storage_s3_addressing_style: str = Field(
        default="auto",
        pattern="^(auto|path|virtual)$",
        description="S3 addressing style (MinIO: path)",
    )

    # --- run-store maintenance (shared/maintenance.py) ---
    maintenance_dlq_threshold: int = Field(
        default=100,
        ge=0,
        description="Dead runs per queue above which maintenance logs an error and alerts",
    )
    maintenance_stuck_grace_s: int = Field(
        default=60,
        ge=0,
        description="Grace past a job's time limit before a RUNNING run is redelivered",
    )
    maintenance_partitions_ahead_days: int = Field(
        default=3,
        ge=1,
        description="Days of job_runs / job_executions partitions the maintenance creates ahead "
        "of today (rows of a day without one go to the default partition)",
    )

    def retry_policy(self, queue: str) -> RetryPolicy:
        return self.retries.get(queue) or _registered_retries().get(queue) or FALLBACK_RETRY

    @model_validator(mode="after")
    def _queue_servers_agree_with_sentinels(self) -> Settings:
        masters = set(self.redis_queue_sentinel_masters)
        if masters and not self.redis_sentinels:
            raise ValueError("REDIS_QUEUE_SENTINEL_MASTERS needs REDIS_SENTINELS")
        if self.redis_sentinels and set(self.redis_queue_urls) - masters:
            missing = ", ".join(sorted(set(self.redis_queue_urls) - masters))
            # Without its master, the URL's host would be ignored: the queue would silently
            # land on REDIS_SENTINEL_MASTER's server.
            raise ValueError(
                f"with REDIS_SENTINELS, each queue of REDIS_QUEUE_URLS needs its master in "
                f"REDIS_QUEUE_SENTINEL_MASTERS (missing: {missing})"
            )
        return self

    @property
    def dedup_window_ms(self) -> int:
        return self.dedup_window_s * 1000

    @property
    def database_dsn(self) -> str:
        """The libpq form of `database_url` (for psycopg without SQLAlchemy)."""
        return self.database_url.replace("postgresql+psycopg://", "postgresql://", 1)


class DomainSettings(BaseSettings):
    """Base of a domain's settings class: give it its own `env_prefix`, e.g.

        class BillingSettings(DomainSettings):
            model_config = SettingsConfigDict(env_prefix="BILLING_")

    (the rest of the configuration, `.env` and a field settable by its name as well as by its
    `validation_alias`, is inherited) and read it with `settings_for(BillingSettings)` (once per
    process, cleared with the kernel's).
    """

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)


S = TypeVar("S", bound=BaseSettings)

_cache: dict[type[Any], Any] = {}


def settings_for(cls: type[S]) -> S:
    """The process's instance of a settings class, read from the environment on first use."""
    found = _cache.get(cls)
    if found is None:
        found = _cache[cls] = cls()
    return found


class _GetSettings:
    """`get_settings()`: the kernel's settings; `get_settings.cache_clear()` forgets every
    settings instance of the process (the kernel's and the domains'), e.g. after an env change."""

    def __call__(self) -> Settings:
        return settings_for(Settings)

    @staticmethod
    def cache_clear() -> None:
        _cache.clear()


get_settings = _GetSettings()
