"""EIP-1559 fees: first fees under the cap, replacement bumps."""

from __future__ import annotations

import pytest

from chain.errors import FeeCapExceeded
from chain.fees import GWEI, Fees, bumped, initial_fees


@pytest.mark.parametrize(
    ("base", "tip", "cap", "expected"),
    [
        (10 * GWEI, 1 * GWEI, 300 * GWEI, Fees(21 * GWEI, 1 * GWEI)),  # 2 x base + tip
        (100 * GWEI, 2 * GWEI, 150 * GWEI, Fees(150 * GWEI, 2 * GWEI)),  # capped
        (0, 1 * GWEI, 300 * GWEI, Fees(1 * GWEI, 1 * GWEI)),
    ],
)
def test_initial_fees_leave_room_for_base_fee_growth_under_the_cap(
    base: int, tip: int, cap: int, expected: Fees
) -> None:
    assert initial_fees(base, priority_fee=tip, cap=cap) == expected


def test_a_base_fee_above_the_cap_waits_instead_of_sending() -> None:
    with pytest.raises(FeeCapExceeded):
        initial_fees(300 * GWEI, priority_fee=GWEI, cap=300 * GWEI)


def test_a_replacement_raises_both_fees_by_the_bump_and_stops_at_the_cap() -> None:
    assert bumped(Fees(100, 10), percent=25, cap=1_000) == Fees(125, 13)
    assert bumped(Fees(1_000, 10), percent=10, cap=1_000) is None
    assert bumped(Fees(5, 0), percent=10, cap=1_000) == Fees(6, 1)


def test_a_replacement_is_priced_from_the_market_at_least_bumped_and_capped() -> None:
    from chain.fees import repriced

    old = Fees(1_200, 1_000)
    spike = initial_fees(8_000, priority_fee=1_000, cap=100_000)  # a 100x base fee
    assert repriced(old, spike, percent=25, cap=100_000) == Fees(17_000, 1_250)  # one step
    assert repriced(old, Fees(1_000, 1_000), percent=25, cap=100_000) == Fees(1_500, 1_250)
    assert repriced(old, spike, percent=25, cap=10_000) == Fees(10_000, 1_250)  # at the cap
    assert repriced(Fees(10_000, 1_000), spike, percent=25, cap=10_000) is None
