"""Export throughput and memory: a 1,000,000-row ACCOUNTING export, in one run.

    .venv/bin/python bench/export.py                  # 1,000,000 rows
    .venv/bin/python bench/export.py --rows 200000    # shorter

In a private database (`Sandbox`), seeds `--rows` ledger rows for one org, then measures, each
in a fresh child process (so its peak RSS is its own):
- `COPY (<the export's query>) TO STDOUT (FORMAT csv)` drained by psycopg: the speed limit;
- the CSV export (`build_export`: server-side cursor, neutralisation, local storage writer);
- the XLSX export (xlsxwriter, constant memory).
Printed per case: rows/s, seconds, peak RSS (ru_maxrss) and the output size. Targets (issue 6):
CSV >= 100,000 rows/s and peak RSS < 200 MB. The machine is shared: repeat and compare ratios.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from bench.sandbox import Sandbox
from shared.config import Settings

ORG = uuid.UUID("00000000-0000-0000-0000-00000000e0e0")


def seed(dsn: str, rows: int) -> float:
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit TO off")
        conn.execute(
            """
            INSERT INTO ledger_entries (org_id, entry_date, journal, account, label, debit, credit, reference)
            SELECT %(org)s, DATE '2026-01-01' + (i %% 365), CASE WHEN i %% 2 = 0 THEN 'SALES' ELSE 'BANK' END,
                   '4110' || (i %% 97), CASE WHEN i %% 50 = 0 THEN '=cmd|calc ' || i
                                            ELSE 'Invoice ' || i || ', customer "' || (i %% 1000) || '"' END,
                   (i %% 100000) / 100.0, 0, 'REF-' || i
            FROM generate_series(1, %(n)s) AS i
            """,
            {"org": ORG, "n": rows},
        )
        conn.execute("VACUUM ANALYZE ledger_entries")
    return time.perf_counter() - started


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_copy(settings: Settings) -> dict[str, Any]:
    from workers.export import query, registry
    from workers.export.contracts import ExportParams

    plan = query.plan(registry.get("ACCOUNTING"), ExportParams(), ORG)
    started = time.perf_counter()
    size = 0
    with psycopg.connect(settings.database_dsn) as conn:
        conn.execute("SET TimeZone TO 'UTC'")
        select = psycopg.ClientCursor(conn).mogrify(plan.select, plan.params)
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY ({select}) TO STDOUT (FORMAT csv, HEADER)") as copy,
        ):
            for block in copy:
                size += len(block)
    return {"seconds": time.perf_counter() - started, "bytes": size}


def child_export(settings: Settings, fmt: str, root: str) -> dict[str, Any]:
    from shared.jobs.context import JobContext
    from shared.runtime import Runtime
    from shared.storage.backends.local import LocalBackend
    from workers.export import store
    from workers.export.build import build_export
    from workers.export.contracts import ExportBuildV2, ExportParams
    from workers.export.wiring import build_exporter

    runtime = Runtime(settings)
    exporter = build_exporter(runtime, storage=LocalBackend(root, "bench"))
    params = ExportParams(format=fmt)  # type: ignore[arg-type]
    by = uuid.uuid4()
    with runtime.pool.connection() as conn:
        export_id = store.insert(
            conn,
            org_id=ORG,
            requested_by=by,
            type="ACCOUNTING",
            params=params.model_dump(mode="json"),
        )
    payload = ExportBuildV2(
        org_id=ORG, entity_id=export_id, requested_by=by, type="ACCOUNTING", params=params
    )
    reports: list[int] = []
    job = JobContext(
        job_id=f"bench-{export_id}", job_name="export:build", queue="export", org_id=ORG,
        attempt=1, max_attempts=1, message_id="bench",
        _write_progress=lambda _id, done, total, cp: bool(reports.append(done)),
    )  # fmt: skip
    started = time.perf_counter()
    result = build_export(payload, job, exporter)
    seconds = time.perf_counter() - started
    runtime.close()
    return {
        "seconds": seconds,
        "bytes": result["size_bytes"],
        "rows": result["rows"],
        "reports": len(reports),
    }


def run_child(case: str, sandbox: Sandbox, root: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", case, "--root", root]
    out = subprocess.run(cmd, env=sandbox.env(), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--child", choices=["copy", "CSV", "XLSX"])
    parser.add_argument("--root")
    args = parser.parse_args()
    if args.child:
        settings = Settings()
        result = (
            child_copy(settings)
            if args.child == "copy"
            else child_export(settings, args.child, args.root)
        )
        result["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(result))
        return

    sandbox = Sandbox(Settings())
    try:
        sandbox.create()
        seeded = seed(sandbox.dsn, args.rows)
        print(
            f"seeded {args.rows:,} ledger rows in {seeded:.1f} s (database {sandbox.database_url.rsplit('/', 1)[1]})"
        )
        with tempfile.TemporaryDirectory(prefix="jobfleet-bench-export-") as root:
            results = {case: run_child(case, sandbox, root) for case in ("copy", "CSV", "XLSX")}
        base = results["copy"]["seconds"]
        print(
            f"{'case':<6} {'rows/s':>10} {'seconds':>8} {'vs COPY':>8} {'peak RSS MB':>12} {'MB out':>8}"
        )
        for case, r in results.items():
            rate = args.rows / r["seconds"]
            print(
                f"{case:<6} {rate:>10,.0f} {r['seconds']:>8.2f} {base / r['seconds']:>7.2f}x "
                f"{r['peak_rss_mb']:>12.1f} {r['bytes'] / 1e6:>8.1f}"
            )
        csv_rate = args.rows / results["CSV"]["seconds"]
        print(
            f"targets: CSV >= 100,000 rows/s: {'met' if csv_rate >= 100_000 else 'MISSED'} ({csv_rate:,.0f}); "
            f"CSV peak RSS < 200 MB: {'met' if results['CSV']['peak_rss_mb'] < 200 else 'MISSED'}"
        )
    finally:
        sandbox.destroy()


if __name__ == "__main__":
    main()
