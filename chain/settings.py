"""Settings of the EVM client library (`CHAIN_*`): node, transactions, signer locks, outage
window, wallet keys and contract addresses; read with `chain_settings()` by every process that
uses the library. A domain using it lists `ChainSettings` in its registration, so that
`fleet config` shows them.
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.config import DomainSettings, settings_for


class ChainSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="CHAIN_")

    rpc_url: str = Field(
        default="http://127.0.0.1:8545", description="JSON-RPC endpoint of the EVM node"
    )
    chain_id: int | None = Field(
        default=None,
        validation_alias="CHAIN_ID",
        description="Expected chain id (checked at connect; None: any)",
    )
    rpc_timeout_s: float = Field(default=10.0, description="Timeout of one JSON-RPC request")
    receipt_timeout_s: float = Field(
        default=120.0,
        description="Longest wait for a receipt, replacements included, before retrying the job",
    )
    replace_after_s: float = Field(
        default=30.0,
        description="A transaction unmined this long is replaced (same nonce, fees from the market, at least bumped)",
    )
    await_in_worker_s: float = Field(
        default=0.0,
        ge=0,
        description="How long a worker thread waits for its transaction's receipt and confirmations before handing the job back to look again 1 s later (no attempt spent; the thread serves other actions meanwhile); 0: one look right after the broadcast",
    )
    fee_bump_percent: int = Field(
        default=25, ge=10, description="Fee increase of a replacement transaction"
    )
    max_fee_gwei: float = Field(
        default=300.0,
        description="The operator's cap on maxFeePerGas; while the market is above it sending waits (no attempt spent)",
    )
    priority_fee_gwei: float = Field(
        default=1.0, description="maxPriorityFeePerGas of a first transaction"
    )
    gas_limit_margin_percent: int = Field(
        default=20, description="Margin added to the estimated gas"
    )
    signer_lock_ttl_ms: int = Field(
        default=30_000,
        description="TTL of the per-signer Redis lock (renewed while a transaction is in flight)",
    )
    signer_lock_wait_ms: int = Field(
        default=10_000,
        description="Longest wait for a busy signer before the job is requeued (not an attempt)",
    )
    confirmations: int = Field(
        default=3,
        ge=0,
        validation_alias="INDEXER_CONFIRMATIONS",
        description="Blocks below the head the indexer stays (and a receipt's depth before a transaction counts)",
    )
    # An unreachable node is the node's state, not the action's fault (DESIGN §3): retried
    # without spending attempts, waits doubling up to the max, for up to the outage window.
    outage_window_s: float = Field(
        default=3_600.0,
        gt=0,
        description="How long an unreachable EVM node is retried before the action is DEAD",
    )
    outage_retry_min_s: float = Field(
        default=1.0, gt=0, description="First retry of an action after the node did not answer"
    )
    outage_retry_max_s: float = Field(
        default=30.0, gt=0, description="Longest wait between two tries while the node is down"
    )
    keks: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Key-encryption keys of wallet keys (JSON {key_id: base64 of 32 bytes}); never logged",
    )
    kek_id: str | None = Field(
        default=None, description="Id in CHAIN_KEKS that encrypts new and rotated keys"
    )
    lottery_address: str | None = Field(
        default=None, description="BlockLucky address (overrides the `chain_contracts` table)"
    )
    badge_address: str | None = Field(
        default=None, description="BlockLuckyPOAP address (overrides the `chain_contracts` table)"
    )


def chain_settings() -> ChainSettings:
    return settings_for(ChainSettings)
