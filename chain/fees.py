"""EIP-1559 fee arithmetic (pure): fees from the market under a cap, and a replacement's."""

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


def repriced(old: Fees, market: Fees, *, percent: int, cap: int) -> Fees | None:
    """A replacement's fees: the market's (`initial_fees` of the next base fee) when they are
    higher, and at least the old ones bumped by `percent` (a node replaces a pending
    transaction only for both fees raised by >= 10 %); None when that does not fit under the cap.
    One replacement catches a spike of any size, instead of a bump of `percent` every
    replacement interval."""
    bump = bumped(old, percent=percent, cap=cap)
    if bump is None:
        return None
    max_fee = max(bump.max_fee, min(market.max_fee, cap))
    priority = min(max(bump.priority_fee, market.priority_fee), max_fee)
    return Fees(max_fee=max_fee, priority_fee=priority)
