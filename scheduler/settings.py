"""The scheduler's settings: its process and periodic intervals (`SchedulerSettings`), the chain
indexer (`IndexerSettings`, `INDEXER_*`) and the lottery keeper (`KeeperSettings`, `KEEPER_*`).

Env var names are those of the fleet's configuration since the start (compose, Kubernetes, the
README): a field whose name is not `<prefix><FIELD>` names its variable (`validation_alias`).
The indexer's confirmations (`INDEXER_CONFIRMATIONS`) are the EVM library's
(`chain.settings.ChainSettings.confirmations`): transactions count at the same depth.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.config import DomainSettings, settings_for


class SchedulerSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="SCHEDULER_")

    threads: int = Field(default=6, description="Size of the scheduler's one thread pool")
    chain_enabled: bool = Field(
        default=True, description="Run the indexer and keeper (off: no chain work in the scheduler)"
    )
    outbox_relay_interval_ms: int = Field(
        default=1_000,
        validation_alias="OUTBOX_RELAY_INTERVAL_MS",
        description="Period of the scheduler's outbox relay pass",
    )
    maintenance_interval_s: float = Field(
        default=60.0,
        gt=0,
        validation_alias="MAINTENANCE_INTERVAL_S",
        description="Period of the run-store maintenance",
    )
    outage_log_every_s: float = Field(
        default=30.0,
        gt=0,
        description="While a job's dependency is down (the EVM node): one log line when the"
        " outage begins, then one every this many seconds, then one when it answers again",
    )


class IndexerSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="INDEXER_")

    interval_ms: int = Field(default=3_000, ge=100, description="Period of the chain indexer")
    window_blocks: int = Field(
        default=2_000, ge=1, le=2_000, description="Most blocks per eth_getLogs window"
    )
    tick_budget_s: float = Field(
        default=2.0,
        gt=0,
        description="Windows indexed back to back per tick while catching up, within this time",
    )
    start_block: int | None = Field(
        default=None,
        description="First block indexed on an empty cursor (None: the lottery's deployment block)",
    )
    hash_depth: int = Field(
        default=1_000,
        ge=16,
        description="Blocks of stored hashes kept below the cursor (deepest reorg handled)",
    )


class KeeperSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="KEEPER_")

    interval_ms: int = Field(default=10_000, ge=100, description="Period of the lottery keeper")
    lock_key: str = Field(default="chain:keeper-lock", description="Redis key of the keeper's lock")


def scheduler_settings() -> SchedulerSettings:
    return settings_for(SchedulerSettings)


def indexer_settings() -> IndexerSettings:
    return settings_for(IndexerSettings)


def keeper_settings() -> KeeperSettings:
    return settings_for(KeeperSettings)


def indexer_interval_s() -> float:
    return indexer_settings().interval_ms / 1000


def keeper_interval_s() -> float:
    return keeper_settings().interval_ms / 1000
