"""A small JSON-RPC client on web3's HTTP provider: typed errors and raw revert data.

Every call goes through `request`, which maps transport failures to `RpcUnavailable` (retried)
and JSON-RPC errors to `RpcError` or, for reverts, `CallReverted` with the revert data, so the
caller decodes the custom error itself instead of relying on message heuristics. web3 is
imported when a client is built, never on import of `chain`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import CallReverted, RpcError, RpcUnavailable, WrongChain

if TYPE_CHECKING:
    from web3 import Web3

#: JSON-RPC error code of a revert (EIP-1474 "execution error"; geth, anvil, reth).
EXECUTION_ERROR = 3


class ChainClient:
    def __init__(self, w3: Web3, *, url: str = "") -> None:
        self.w3 = w3
        self.url = url
        self._chain_id: int | None = None

    @classmethod
    def connect(cls, url: str, *, timeout_s: float = 10.0) -> ChainClient:
        from web3 import HTTPProvider, Web3

        # No provider-level retries: a job retries with its queue's policy, and a down node must
        # be reported at once rather than after web3's silent back-off.
        provider = HTTPProvider(
            url, request_kwargs={"timeout": timeout_s}, exception_retry_configuration=None
        )
        return cls(Web3(provider), url=url)

    def __repr__(self) -> str:
        return f"ChainClient({safe_url(self.url)!r})"

    def request(self, method: str, params: list[Any]) -> Any:
        import requests
        from web3.exceptions import ProviderConnectionError, TimeExhausted

        try:
            response = self.w3.provider.make_request(method, params)  # type: ignore[arg-type]
        except (
            requests.ConnectionError,
            requests.Timeout,
            ProviderConnectionError,
            TimeExhausted,
            OSError,
        ) as exc:
            # The exception text can carry the URL path (providers put API keys there): type only.
            raise RpcUnavailable(
                f"{method} on {safe_url(self.url)}: {type(exc).__name__}"
            ) from None
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            if status >= 500 or status == 429:
                raise RpcUnavailable(f"{method}: HTTP {status}") from None
            raise RpcError(method, {"code": status, "message": f"HTTP {status}"}) from None
        error: Any = response.get("error")
        if error:
            if not isinstance(error, dict):
                raise RpcError(method, {"message": str(error)})
            if _is_revert(error):
                raise CallReverted(
                    f"{method} reverted: {error.get('message', '')}", _revert_data(error)
                )
            raise RpcError(method, error)
        return response.get("result")

    # -- chain state --

    def chain_id(self) -> int:
        if self._chain_id is None:
            self._chain_id = int(self.request("eth_chainId", []), 16)
        return self._chain_id

    def check_chain(self, expected: int | None) -> int:
        actual = self.chain_id()
        if expected is not None and actual != expected:
            raise WrongChain(
                f"node at {safe_url(self.url)} serves chain {actual}, expected CHAIN_ID={expected}"
            )
        return actual

    def block_number(self) -> int:
        return int(self.request("eth_blockNumber", []), 16)

    def base_fee(self) -> int:
        block = self.request("eth_getBlockByNumber", ["latest", False]) or {}
        return int(block.get("baseFeePerGas", "0x0"), 16)

    def next_base_fee(self) -> int:
        """The base fee of the next block (what a transaction sent now must pay at least): the
        last entry of `eth_feeHistory`'s `baseFeePerGas` (EIP-1559 nodes all give it); the
        latest block's when the node has no fee history."""
        try:
            history = self.request("eth_feeHistory", [1, "latest", []]) or {}
        except RpcError:
            return self.base_fee()
        fees = history.get("baseFeePerGas") or []
        return int(fees[-1], 16) if fees else self.base_fee()

    def nonce(self, address: str, tag: str = "pending") -> int:
        return int(self.request("eth_getTransactionCount", [address, tag]), 16)

    def balance(self, address: str) -> int:
        return int(self.request("eth_getBalance", [address, "latest"]), 16)

    # -- calls and transactions --

    def call(self, tx: dict[str, Any], block: str | int = "latest") -> bytes:
        tag = hex(block) if isinstance(block, int) else block
        return bytes.fromhex(str(self.request("eth_call", [_hexify(tx), tag]))[2:])

    def estimate_gas(self, tx: dict[str, Any]) -> int:
        return int(self.request("eth_estimateGas", [_hexify(tx)]), 16)

    def send_raw(self, raw: bytes) -> str:
        return str(self.request("eth_sendRawTransaction", ["0x" + raw.hex()]))

    def receipt(self, tx_hash: str) -> dict[str, Any] | None:
        result = self.request("eth_getTransactionReceipt", [tx_hash])
        return result if result else None

    def transaction(self, tx_hash: str) -> dict[str, Any] | None:
        result = self.request("eth_getTransactionByHash", [tx_hash])
        return result if result else None


def _is_revert(error: dict[str, Any]) -> bool:
    message = str(error.get("message", "")).lower()
    return error.get("code") == EXECUTION_ERROR or "revert" in message


def _revert_data(error: dict[str, Any]) -> bytes:
    data = error.get("data")
    if isinstance(data, dict):  # some nodes nest it: {"data": {"data": "0x..."}}
        data = data.get("data") or data.get("result")
    if isinstance(data, str) and data.startswith("0x"):
        try:
            return bytes.fromhex(data[2:])
        except ValueError:
            return b""
    return b""


def _hexify(tx: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tx.items():
        if isinstance(value, bytes):
            out[key] = "0x" + value.hex()
        elif isinstance(value, int) and not isinstance(value, bool):
            out[key] = hex(value)
        else:
            out[key] = value
    return out


def safe_url(url: str) -> str:
    """Scheme, host and port only: RPC providers often put an API key in the path or query."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
