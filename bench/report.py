"""Folds repetitions into medians, compares jobfleet (and Celery) with bare Dramatiq and prints
the table, with the machine probe and the idle cost.

Budgets (DESIGN §9): drain >= 0.8x bare, enqueue >= 0.8x bare, p95 send-to-start <= 10 ms at
100 jobs/s, idle wake-up <= 5 ms, an idle worker process <= 10 Redis commands/s.
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
    ("enqueue_calls_per_s", "enqueue, send calls alone, jobs/s", ("enqueue", "calls_per_s")),
    ("drain_per_s", "drain, jobs/s (first -> last done)", ("drain", "per_s")),
    ("drain_steady_per_s", "drain, jobs/s (10 % -> 90 % done)", ("drain", "steady_per_s")),
    ("latency_p50_ms", "send-to-start p50, ms (paced)", ("latency", "p50_ms")),
    ("latency_p95_ms", "send-to-start p95, ms (paced)", ("latency", "p95_ms")),
    ("latency_p99_ms", "send-to-start p99, ms (paced)", ("latency", "p99_ms")),
    ("wake_median_ms", "idle wake-up median, ms", ("wakeup", "median_ms")),
)

#: key -> (kind, bound, text): a ratio fleet/bare at least bound, or an absolute at most bound.
TARGETS: dict[str, tuple[str, float, str]] = {
    "enqueue_per_s": ("ratio_min", 0.8, ">= 0.8x"),
    "drain_per_s": ("ratio_min", 0.8, ">= 0.8x"),
    "latency_p95_ms": ("abs_max", 10.0, "<= 10 ms"),
    "wake_median_ms": ("abs_max", 5.0, "<= 5 ms"),
}

SYSTEMS = ("bare", "fleet", "celery", "bare_100")
#: The machine probe's figures (`machine.snapshot`), taken before and after each system.
PROBES = (
    "loadavg_1m", "pg_commit_ms", "pg_async_commit_ms", "redis_rtt_us", "python_us",
    "spare_cores",
)  # fmt: skip
#: The enqueue phase's CPU per send by group of processes (`machine.send_cpu`), µs.
CPU_GROUPS = ("bench", "postgres_run", "postgres_background", "redis", "postgres", "other")


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
        for key in PROBES:
            probes = (
                _get(r, (when, key))
                for r in results
                for when in ("machine_before", "machine_after")
            )
            out[system][key] = median(probes)
        out[system]["enqueue_machine_busy"] = median(
            _get(r, ("enqueue", "machine_busy")) for r in results
        )
        for group in CPU_GROUPS:  # a group with no process meanwhile: 0
            out[system][f"cpu_{group}"] = median(
                float(r["enqueue"]["cpu_us"].get(group, 0.0))
                for r in results
                if isinstance(r.get("enqueue", {}).get("cpu_us"), dict)
            )
    return out


#: Ratios = {metric: {system: {"each": [per repetition], "median": ...}}} (`paired_ratios`).
Ratios = dict[str, dict[str, dict[str, Any]]]


def paired_ratios(reps: Sequence[dict[str, Any]]) -> Ratios:
    """Each repetition's ratio system/bare, and their median. A repetition measures every
    system within minutes; the machine (a shared 2-core box) drifts more than that between
    repetitions, so the median of these paired ratios is steadier than the ratio of the
    medians, which may take bare's figure from a quiet repetition and jobfleet's from a busy
    one."""
    out: Ratios = {}
    for key, _, path in METRICS:
        out[key] = {}
        for system in ("fleet", "celery"):
            each = []
            for rep in reps:
                bare, value = _get(rep.get("bare", {}), path), _get(rep.get(system, {}), path)
                if bare and value is not None:
                    each.append(value / bare)
            if each:
                out[key][system] = {"each": each, "median": median(each)}
    return out


def _paired(ratios: Ratios | None, key: str, system: str) -> float | None:
    entry = (ratios or {}).get(key, {}).get(system)
    return None if entry is None else float(entry["median"])


def verdicts(
    summary: dict[str, dict[str, float | None]], ratios: Ratios | None = None
) -> dict[str, dict[str, Any]]:
    """Met or missed, per budget; a ratio budget is judged on the paired ratio when given."""
    out: dict[str, dict[str, Any]] = {}
    for key, (kind, bound, text) in TARGETS.items():
        bare, fleet = summary["bare"].get(key), summary["fleet"].get(key)
        ratio = _paired(ratios, key, "fleet")
        if ratio is None:
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


def _ratio(value: float | None, bare: float | None, paired: float | None = None) -> str:
    if paired is not None:
        return f"{paired:.2f}x"
    return f"{value / bare:.2f}x" if value is not None and bare else "-"


def render(
    summary: dict[str, dict[str, float | None]],
    config: dict[str, Any],
    machine: dict[str, Any] | None = None,
    ratios: Ratios | None = None,
) -> str:
    checks = verdicts(summary, ratios)
    celery = config.get("celery", "not installed")
    measured = celery != "not installed"
    head = (
        f"bare Dramatiq vs jobfleet vs Celery: N={config['jobs']:,} no-op jobs, "
        f"{config['processes']} processes (Dramatiq: x {config['threads']} threads; Celery: "
        f"prefork, early acks, no result backend), latency at {config['rate']:g} jobs/s x "
        f"{config['latency_jobs']}, wake-up after {config['idle_s']:g} s idle x "
        f"{config['wake_samples']}; median of {config['repeat']} run(s)"
    )
    lines = [head]
    if ratios:
        lines.append(
            "ratio: the median of each repetition's own ratio to bare Dramatiq (paired: the "
            "machine's drift between repetitions cancels out)"
        )
    lines.append("")
    row = "{:<38} {:>9} {:>9} {:>7} {:>9} {:>7}   {:<9} {}"
    lines.append(
        row.format("", "bare", "jobfleet", "ratio", "celery", "ratio", "target", "(jobfleet)")
    )
    for key, label, _ in METRICS:
        bare, fleet = summary["bare"][key], summary["fleet"][key]
        cel = summary.get("celery", {}).get(key)
        check = checks.get(key)
        verdict = (
            "" if check is None or check["met"] is None else ("met" if check["met"] else "MISSED")
        )
        lines.append(
            row.format(
                label,
                _fmt(bare),
                _fmt(fleet),
                _ratio(fleet, bare, _paired(ratios, key, "fleet")),
                _fmt(cel) if measured else "n/i",
                _ratio(cel, bare, _paired(ratios, key, "celery")) if measured else "-",
                check["target"] if check else "",
                verdict,
            )
        )
    lines.append(
        f"{'idle wake-up median, ms, bare @100 ms':<38} {_fmt(summary['bare_100']['wake_median_ms']):>9}"
    )
    for key in ("enqueue_per_s", "drain_per_s") if ratios and config["repeat"] > 1 else ():
        label = next(text for k, text, _ in METRICS if k == key).split(",")[0]
        for system in ("fleet", "celery"):
            entry = ratios.get(key, {}).get(system) if ratios else None
            if entry is not None:
                each = ", ".join(f"{r:.2f}" for r in entry["each"])
                name = "jobfleet" if system == "fleet" else system
                lines.append(f"  {label} {name}/bare by repetition: {each}")
    lines.append("")
    if not measured:
        lines.append("celery: not installed (n/i; pip install -e '.[bench]' to measure it)")
    else:
        lines.append(f"celery {celery}: prefork, Redis broker, no result backend, early acks")
    lines.append(
        f"worker idle timeout: bare {config['bare_worker_timeout_ms']} ms (Dramatiq default), "
        f"jobfleet {config['fleet_worker_timeout_ms']} ms (worker_idle_timeout_ms)"
    )
    lines.append(
        f"bare broker middleware (stock, nothing removed): {', '.join(config['bare_middleware'])}"
    )
    if machine is not None:
        lines.append(
            f"machine: {machine.get('cpus')} CPUs, Python {machine.get('python')}, "
            f"dramatiq {machine.get('dramatiq')}; load average at the end "
            + "/".join(f"{v:.2f}" for v in machine.get("loadavg_end", ()))
            + " (1/5/15 min)"
        )
    for system in ("bare", "fleet", "celery"):
        if system == "celery" and not measured:
            continue
        got = summary[system]
        lines.append(
            f"machine while measuring {system} (probes before and after): load average "
            f"{_fmt(got.get('loadavg_1m'))}, spare cores {_fmt(got.get('spare_cores'))}; "
            f"Postgres commit durable {_fmt(got.get('pg_commit_ms'))} ms, async "
            f"{_fmt(got.get('pg_async_commit_ms'))} ms; Redis round trip "
            f"{_fmt(got.get('redis_rtt_us'))} µs; Python {_fmt(got.get('python_us'))} µs "
            "per 1,000 calls"
        )
    for system in ("bare", "fleet", "celery"):
        got = summary.get(system, {})
        if got.get("cpu_bench") is None:
            continue
        groups = ", ".join(
            f"{label} {_fmt(got.get(f'cpu_{group}'))}"
            for group, label in (
                ("bench", "producer"), ("postgres_run", "Postgres (this run)"),
                ("postgres_background", "Postgres WAL/background"), ("redis", "Redis"),
                ("postgres", "Postgres (other sessions)"), ("other", "other processes"),
            )
        )  # fmt: skip
        busy = got.get("enqueue_machine_busy")
        lines.append(
            f"enqueue CPU per send, µs, {system}: {groups}; all cores "
            f"{'-' if busy is None else f'{busy:.0%}'} busy"
        )
    return "\n".join(lines)


def render_idle(idle: dict[str, Any]) -> str:
    """The idle cost of jobfleet worker processes (`bench/idle_cost.py`), in the same report."""
    rate = idle["commands_per_s_per_process"]
    budget = idle["budget_per_process"]
    wake = idle["wakeup_ms"]
    by = ", ".join(
        f"{name} {value:g}"
        for name, value in sorted(idle["by_command"].items(), key=lambda kv: -kv[1])[:6]
    )
    return "\n".join(
        [
            "",
            f"idle jobfleet worker process: {rate} Redis commands/s (budget <= {budget:g}: "
            f"{'met' if rate <= budget else 'MISSED'}); {idle['processes']} processes x "
            f"{idle['threads']} threads, {idle['window_s']:g} s window, private Redis",
            f"  by command, per second: {by}",
            f"  AOF growth {idle['aof_bytes_per_min'] / 1024:.1f} KiB/min; idle wake-up median "
            f"{wake['median']} ms, max {wake['max']} ms ({wake['samples']} jobs)",
        ]
    )


def write_json(directory: Path, name: str, data: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    return path
