"""Errors of the chain client. Retryable ones are plain `ChainError`s; the rest are permanent."""

from __future__ import annotations

from typing import Any

from shared.errors import DependencyUnavailable, FleetError, PermanentError, RetryLater


class ChainError(FleetError):
    """A chain operation failed; retrying may help."""

    code = "CHAIN_ERROR"


class RpcUnavailable(ChainError, DependencyUnavailable):
    """The EVM node cannot be reached or did not answer in time."""

    code = "RPC_UNAVAILABLE"


class RpcError(ChainError):
    """The EVM node answered a JSON-RPC error."""

    code = "RPC_ERROR"

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.method = method
        self.rpc_code = error.get("code")
        self.rpc_message = str(error.get("message", ""))
        super().__init__(f"{method}: {self.rpc_message} (code {self.rpc_code})")


class CallReverted(ChainError):
    """A call or gas estimate reverted; `data` holds the raw revert data (may be empty)."""

    code = "REVERTED"

    def __init__(self, message: str, data: bytes) -> None:
        super().__init__(message)
        self.data = data


class TxNotMined(ChainError):
    """No receipt within the receipt timeout (replacements included); the job retries."""

    code = "TX_NOT_MINED"


class FeeCapExceeded(ChainError, RetryLater):
    """The network's base fee is above the configured cap (`CHAIN_MAX_FEE_GWEI`); sending waits
    for cheaper blocks, without spending an attempt."""

    code = "FEE_CAP_EXCEEDED"


class Underpriced(ChainError, RetryLater):
    """The node refused the transaction's fees (below the next block's base fee, or its minimum)
    and repricing within the cap did not get it in; sent again later, not an attempt."""

    code = "UNDERPRICED"


class WrongChain(PermanentError):
    """The node serves another chain than the configured `CHAIN_ID`."""

    code = "WRONG_CHAIN"


class ContractNotDeployed(PermanentError):
    """No address is known for a reference contract on this chain (run `fleet chain deploy`)."""

    code = "CONTRACT_NOT_DEPLOYED"


class KekNotConfigured(PermanentError):
    """No key-encryption key is configured (`CHAIN_KEKS`, `CHAIN_KEK_ID`)."""

    code = "KEK_NOT_CONFIGURED"


class WalletKeyUnreadable(PermanentError):
    """A stored wallet key cannot be decrypted (wrong or missing key-encryption key)."""

    code = "WALLET_KEY_UNREADABLE"


class SignerBusy(RetryLater):
    """Another process holds this signer's lock; the job comes back without using an attempt."""

    code = "SIGNER_BUSY"
