"""Order statistics for the benchmark's samples (nearest-rank, no interpolation)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile (0 < q <= 1): the smallest value with at least q of the
    samples at or below it."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/max in milliseconds of latencies given in seconds."""
    return {
        "n": len(seconds),
        "p50_ms": percentile(seconds, 0.50) * 1000,
        "p95_ms": percentile(seconds, 0.95) * 1000,
        "p99_ms": percentile(seconds, 0.99) * 1000,
        "max_ms": max(seconds) * 1000,
    }
