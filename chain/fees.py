"""EIP-1559 fee arithmetic (pure): first fees under a cap, and the bump of a replacement."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import FeeCapExceeded

GWEI = 10**9


@dataclass(frozen=True)
class Fees:
    max_fee: int
    priority_fee: int

    def as_tx_fields(self) -> dict[str, int]:
        return {"maxFeePerGas": self.max_fee, "maxPriorityFeePerGas": self.priority_fee}


def initial_fees(base_fee: int, *, priority_fee: int, cap: int) -> Fees:
    """`2 x base + tip` (room for six full blocks of base-fee growth), capped.

    Raises `FeeCapExceeded` (retried later) when even `base + tip` is above the cap: such a
    transaction could not be included now.
    """
    priority = min(priority_fee, cap)
    if base_fee + priority > cap:
        raise FeeCapExceeded(
            f"base fee {base_fee / GWEI:.3f} gwei + tip exceeds the cap {cap / GWEI:.3f} gwei"
        )
    return Fees(max_fee=min(cap, 2 * base_fee + priority), priority_fee=priority)


def bumped(fees: Fees, *, percent: int, cap: int) -> Fees | None:
    """Fees of a replacement (nodes want both raised by >= 10 %); None past the cap."""
    factor = 100 + percent
    priority = -(-fees.priority_fee * factor // 100) or 1
    max_fee = max(-(-fees.max_fee * factor // 100), priority)
    if max_fee > cap:
        return None
    return Fees(max_fee=max_fee, priority_fee=priority)
