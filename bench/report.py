"""Folds repetitions into medians, compares jobfleet with bare Dramatiq and prints the table.

Budgets (DESIGN §9): drain >= 0.6x bare, enqueue >= 0.5x bare, p95 send-to-start <= 10 ms at
100 jobs/s, idle wake-up <= 50 ms.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .stats import median

#: (key, label, path inside one system's results)
METRICS: tuple[tuple[str, str, tuple[str, str]], ...] = (
    ("enqueue_per_s", "enqueue, jobs/s (1 producer thread)", ("enqueue", "per_s")),
    ("drain_per_s", "drain, jobs/s (first -> last done)", ("drain", "per_s")),
    ("drain_steady_per_s", "drain, jobs/s (10 % -> 90 % done)", ("drain", "steady_per_s")),
    ("latency_p50_ms", "send-to-start p50, ms (paced)", ("latency", "p50_ms")),
    ("latency_p95_ms", "send-to-start p95, ms (paced)", ("latency", "p95_ms")),
    ("latency_p99_ms", "send-to-start p99, ms (paced)", ("latency", "p99_ms")),
    ("wake_median_ms", "idle wake-up median, ms", ("wakeup", "median_ms")),
)

#: key -> (kind, bound, text): a ratio fleet/bare at least bound, or an absolute at most bound.
TARGETS: dict[str, tuple[str, float, str]] = {
    "enqueue_per_s": ("ratio_min", 0.5, ">= 0.5x"),
    "drain_per_s": ("ratio_min", 0.6, ">= 0.6x"),
    "latency_p95_ms": ("abs_max", 10.0, "<= 10 ms"),
    "wake_median_ms": ("abs_max", 50.0, "<= 50 ms"),
}

SYSTEMS = ("bare", "fleet", "bare_100")


def _get(result: dict[str, Any], path: tuple[str, str]) -> float | None:
    section = result.get(path[0])
    value = section.get(path[1]) if isinstance(section, dict) else None
    return float(value) if isinstance(value, int | float) else None


def aggregate(reps: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """system -> metric -> median over the repetitions (the machine's load and commit
    latency: over the probes taken before and after each system's measurement)."""
    out: dict[str, dict[str, float | None]] = {}
    for system in SYSTEMS:
        results = [rep.get(system, {}) for rep in reps]
        out[system] = {key: median(_get(r, path) for r in results) for key, _, path in METRICS}
        for key in ("loadavg_1m", "pg_commit_ms"):
            probes = (
                _get(r, (when, key))
                for r in results
                for when in ("machine_before", "machine_after")
            )
            out[system][key] = median(probes)
    return out


def verdicts(summary: dict[str, dict[str, float | None]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, (kind, bound, text) in TARGETS.items():
        bare, fleet = summary["bare"].get(key), summary["fleet"].get(key)
        ratio = fleet / bare if fleet is not None and bare else None
        value = ratio if kind == "ratio_min" else fleet
        met = None if value is None else (value >= bound if kind == "ratio_min" else value <= bound)
        out[key] = {"target": text, "ratio": ratio, "value": value, "met": met}
    return out


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def render(summary: dict[str, dict[str, float | None]], config: dict[str, Any]) -> str:
    checks = verdicts(summary)
    head = (
        f"jobfleet vs bare Dramatiq: N={config['jobs']:,} no-op jobs, {config['processes']} processes x "
        f"{config['threads']} threads, latency at {config['rate']:g} jobs/s x {config['latency_jobs']}, "
        f"wake-up after {config['idle_s']:g} s idle x {config['wake_samples']}; "
        f"median of {config['repeat']} run(s)"
    )
    lines = [head, ""]
    row = "{:<38} {:>10} {:>10} {:>8}   {:<9} {}"
    lines.append(row.format("", "bare", "jobfleet", "ratio", "target", ""))
    for key, label, _ in METRICS:
        bare, fleet = summary["bare"][key], summary["fleet"][key]
        ratio = fleet / bare if fleet is not None and bare else None
        check = checks.get(key)
        verdict = (
            "" if check is None or check["met"] is None else ("met" if check["met"] else "MISSED")
        )
        lines.append(
            row.format(
                label,
                _fmt(bare),
                _fmt(fleet),
                f"{ratio:.2f}x" if ratio is not None else "-",
                check["target"] if check else "",
                verdict,
            )
        )
    lines.append(
        f"{'idle wake-up median, ms, bare @100 ms':<38} {_fmt(summary['bare_100']['wake_median_ms']):>10}"
    )
    lines.append("")
    lines.append(
        f"worker idle timeout: bare {config['bare_worker_timeout_ms']} ms (Dramatiq default), "
        f"jobfleet {config['fleet_worker_timeout_ms']} ms (worker_idle_timeout_ms)"
    )
    lines.append(
        f"bare broker middleware (stock, nothing removed): {', '.join(config['bare_middleware'])}"
    )
    for system in ("bare", "fleet"):
        load, commit = summary[system].get("loadavg_1m"), summary[system].get("pg_commit_ms")
        lines.append(
            f"machine while measuring {system}: load average {_fmt(load)}, "
            f"durable Postgres commit {_fmt(commit)} ms (probes before and after)"
        )
    return "\n".join(lines)


def write_json(directory: Path, name: str, data: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    return path
