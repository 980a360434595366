"""The Charts page: runs finished per queue and per state, dead runs per queue, and send->start
and duration percentiles, over the last hour (1-minute bins) or day (15-minute bins), as SVG
drawn here (no script, no build step) and refreshed by htmx polling.

Read from the per-minute rollups (`shared/run_stats.py`: a few rows a minute, whatever the
throughput) up to their watermark, and from `job_runs` after it (the minutes not rolled up yet,
at most `LIVE_TAIL`: an index range on `finished_at`). Fleet-wide: every org's runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .. import run_stats
from ..runtime import Runtime

RANGES = {"hour": (timedelta(hours=1), timedelta(minutes=1)),
          "day": (timedelta(days=1), timedelta(minutes=15))}  # fmt: skip
#: The charts read at most this much of `job_runs` itself (the minutes after the watermark).
LIVE_TAIL = timedelta(minutes=10)
PALETTE = ("#2453c7", "#167a3e", "#b4231f", "#9a6400", "#7b3fb8", "#0f8a8a", "#c2417a",
           "#5b6475")  # fmt: skip
STATE_COLOURS = {"COMPLETED": "#167a3e", "DEAD": "#b4231f", "CANCELED": "#5b6475"}
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 400, 140, 36, 18, 8


@dataclass
class Series:
    name: str
    colour: str
    values: list[float]
    points: str = ""

    @property
    def total(self) -> float:
        return sum(self.values)


@dataclass
class Chart:
    key: str
    title: str
    unit: str
    series: list[Series]
    labels: list[tuple[float, str, str]] = field(default_factory=list)
    ymax: float = 0.0
    ymax_label: str = ""
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom: int = BOTTOM
    top: int = TOP


def _nice(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^n at least `value` (1 for nothing)."""
    if value <= 0:
        return 1.0
    scale = 10 ** len(str(int(value))) / 10 if value >= 1 else 1.0
    for step in (1, 2, 5, 10):
        if value <= step * scale:
            return float(step * scale)
    return float(10 * scale)


def _short(value: float, unit: str) -> str:
    """An axis label that fits the chart's margin: 500 ms, 20 s, 1.5k runs..."""
    if unit == "ms":
        return f"{value / 1000:g} s" if value >= 1000 else f"{value:g} ms"
    return f"{value / 1000:g}k" if value >= 1000 else f"{value:g}"


def _draw(chart: Chart, bins: list[datetime], fmt: str) -> Chart:
    chart.ymax = _nice(max((max(s.values, default=0) for s in chart.series), default=0))
    chart.ymax_label = _short(chart.ymax, chart.unit)
    plot_w, plot_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP
    n = max(len(bins) - 1, 1)
    for s in chart.series:
        s.points = " ".join(
            f"{LEFT + plot_w * i / n:.1f},{TOP + plot_h * (1 - v / chart.ymax):.1f}"
            for i, v in enumerate(s.values)
        )
    ticks = [0, len(bins) // 4, len(bins) // 2, 3 * len(bins) // 4, len(bins) - 1]
    anchors = ("start", "middle", "middle", "middle", "end")
    chart.labels = [
        (LEFT + plot_w * i / n, bins[i].strftime(fmt), anchor)
        for i, anchor in zip(ticks, anchors, strict=True)
        if bins
    ]
    return chart


def _bins(since: datetime, now: datetime, step: timedelta) -> list[datetime]:
    out, at = [], since
    while at <= now:
        out.append(at)
        at += step
    return out


def _floor(at: datetime, step: timedelta) -> datetime:
    origin = datetime(2000, 1, 1, tzinfo=UTC)
    return origin + ((at - origin) // step) * step


def data(runtime: Runtime, span: str, *, now: datetime | None = None) -> dict[str, Any]:
    """Every chart of `span` ("hour" or "day"), drawn, and the latency table."""
    length, step = RANGES[span]
    now = now or datetime.now(UTC)
    since = _floor(now - length, step) + step
    bins = _bins(since, now, step)
    index = {b: i for i, b in enumerate(bins)}
    counts: dict[tuple[str, str], list[float]] = {}
    hist: dict[tuple[str, str], dict[int, int]] = {}
    over_time: dict[tuple[str, int], dict[int, int]] = {}
    with runtime.pool.connection() as conn:
        upto = run_stats.watermark(conn) or since
        tail_from = max(upto, since, now - LIVE_TAIL)
        interval = f"{int(step.total_seconds())} seconds"
        width = int(step.total_seconds() // 60)  # the rollup's span of this chart's bins
        rolled = conn.execute(
            "SELECT minute, queue, status, runs FROM run_stats"
            " WHERE span = %s AND minute >= %s AND minute < %s",
            (width, since, upto),
        ).fetchall()
        live_span = {"a": tail_from, "b": now + step, "bin": interval}
        live = conn.execute(run_stats.COUNTS, live_span).fetchall()
        # Summed in SQL: per queue (the table) and per bin (the p95 line), not row by row here.
        latency = conn.execute(
            "WITH l AS (SELECT minute AS at, queue, kind, bucket, runs FROM run_latency"
            "            WHERE span = %(width)s AND minute >= %(since)s AND minute < %(upto)s"
            f"           UNION ALL {run_stats.LATENCY})"
            " SELECT at, queue, kind, bucket, sum(runs) FROM l"
            " GROUP BY GROUPING SETS ((queue, kind, bucket), (at, kind, bucket))",
            {**live_span, "width": width, "since": since, "upto": upto},
        ).fetchall()
    for at, queue, status, n in [*rolled, *live]:
        i = index.get(at)
        if i is not None:
            counts.setdefault((queue, status), [0.0] * len(bins))[i] += float(n)
    for at, queue, kind, bucket, n in latency:
        if at is None:  # a queue's total
            h = hist.setdefault((queue, kind), {})
            h[bucket] = int(n)
        elif (i := index.get(at)) is not None:  # a bin's, every queue
            over_time.setdefault((kind, i), {})[bucket] = int(n)
    queues = sorted({q for q, _ in counts} | {q for q, _ in hist})
    colour = {q: PALETTE[i % len(PALETTE)] for i, q in enumerate(queues)}

    def summed(keys: list[tuple[str, str]]) -> list[float]:
        rows = [counts[k] for k in keys if k in counts]
        return [sum(col) for col in zip(*rows, strict=True)] if rows else [0.0] * len(bins)

    per = "minute" if span == "hour" else "15 min"
    fmt = "%H:%M"
    charts = [
        Chart("throughput", f"Runs finished per {per}, by queue", "runs", [
            Series(q, colour[q], summed([(q, s) for s in run_stats.FINAL])) for q in queues
        ]),
        Chart("states", f"Runs finished per {per}, by state", "runs", [
            Series(s, STATE_COLOURS[s], summed([(q, s) for q in queues])) for s in run_stats.FINAL
        ]),
        Chart("failures", f"Dead runs per {per}, by queue", "runs", [
            Series(q, colour[q], summed([(q, "DEAD")])) for q in queues
        ]),
        Chart("latency", f"p95 per {per}, every queue (ms)", "ms", [
            Series(label, c, [
                (run_stats.percentiles(over_time.get((kind, i), {}), (0.95,)) or [0.0])[0]
                for i in range(len(bins))
            ])
            for kind, label, c in (("wait", "send→start", "#2453c7"),
                                   ("run", "duration", "#9a6400"))
        ]),
    ]  # fmt: skip
    table = []
    for q in queues:
        wait = run_stats.percentiles(hist.get((q, "wait"), {}))
        run = run_stats.percentiles(hist.get((q, "run"), {}))
        total = sum(sum(counts[(q, s)]) for s in run_stats.FINAL if (q, s) in counts)
        table.append({"queue": q, "colour": colour[q], "runs": int(total), "wait": wait,
                      "run": run})  # fmt: skip
    return {
        "span": span,
        "charts": [_draw(c, bins, fmt) for c in charts],
        "table": table,
        "since": since,
        "upto": upto,
        "behind": upto < tail_from,
        "tail_from": tail_from,
    }
