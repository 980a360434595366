"""The operator console's pages on 1,000,000 runs: p50/p95 per page (target: p95 <= 200 ms).

    .venv/bin/python bench/console.py                       # 1,000,000 runs, 60 requests a page
    .venv/bin/python bench/console.py --rows 200000 --requests 30
    .venv/bin/python bench/console.py --without-console-indexes   # the same, before 0013_console

In a private database and broker namespace (`Sandbox`), generates the runs in one
`INSERT ... SELECT FROM generate_series` (secondary indexes dropped during the load and rebuilt
after it, then VACUUM ANALYZE): 200 orgs of very unequal sizes (the biggest has about a fifth of
the runs), 11 job names on 5 queues, 3 % DEAD with 6 error codes, 1 % RUNNING, 1 % QUEUED, half
with a request id, 2 % in the last hour and the rest over 30 days; plus outbox events, AI usage,
suppressions, chain actions and keeper passes. Then starts the console as `make run` does
(`python -m shared.console`, one uvicorn process, token auth) and requests each page
`--requests` times in a row after 5 warm-up requests, over HTTP from one client; the deep page
follows 20 `older` links first and then times its next page. Printed: a table (p50, p95, max,
bytes, within target) and the same as JSON. The machine is shared: repeat and compare.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import psycopg

from bench.sandbox import Sandbox
from shared.config import Settings

TARGET_MS = 200.0
TOKEN = "bench-console-token"
JOBS = [
    ("email:send", "email"), ("email-seq:run_due", "email"), ("ai:run", "ai"),
    ("export:build", "export"), ("doc:ingest", "doc"), ("doc:ocr", "doc"),
    ("doc:extract_structured", "doc"), ("doc:index_search", "doc"),
    ("chain:mint_badge", "chain-actions"), ("chain:claim_prize", "chain-actions"),
    ("chain:claim_refund", "chain-actions"),
]  # fmt: skip
#: The error text of each error code (the search line's words find them).
MESSAGES = [
    "SMTPRecipientsRefused: 550 mailbox unavailable",
    "InvalidPayload: field required: entity_id",
    "WorkerCrashed: the process died 3 times running this job",
    "TimeLimitExceeded: the job ran longer than 600 s",
    "RpcOutage: connection refused by the EVM node",
    "OcrFailed: tesseract could not read page 3",
]
ERRORS = [
    "SMTP_REJECTED",
    "INVALID_PAYLOAD",
    "WORKER_CRASHED",
    "TIME_LIMIT",
    "RPC_OUTAGE",
    "OCR_FAILED",
]

GENERATE = """
INSERT INTO job_runs (org_id, job_name, job_id, queue, status, entity_type, entity_id, payload,
                      result, error_code, error, attempt, max_attempts, request_id, message_id,
                      queued_at, started_at, finished_at, created_on)
SELECT org, job, org::text || ':' || job || ':' || g || ':' || left(md5(g::text), 16), queue,
       status, 'bench', md5(g::text),
       jsonb_build_object('v', 1, 'org_id', org, 'entity_id', md5(g::text), 'api_key', 'sk-bench',
                          'to', 'user' || g || '@example.com',
                          'template_key', (ARRAY['welcome', 'reset', 'invoice', 'digest', 'alert'])[1 + (g %% 5)],
                          'round_id', g %% 1000),
       CASE WHEN status = 'COMPLETED' THEN jsonb_build_object('ok', true) END,
       CASE WHEN status = 'DEAD' THEN (%(errors)s::text[])[1 + (g %% 6)] END,
       CASE WHEN status = 'DEAD' THEN (%(messages)s::text[])[1 + (g %% 6)] || ' (run ' || g || ')' END,
       CASE WHEN status = 'DEAD' THEN 3 ELSE 1 END, 3,
       CASE WHEN r3 < 0.5 THEN 'req-' || g END, md5('m' || g),
       queued_at, queued_at + interval '20 ms',
       CASE WHEN status IN ('COMPLETED', 'DEAD', 'CANCELED', 'FAILED')
            THEN queued_at + interval '20 ms' + make_interval(secs => -ln(greatest(r4, 1e-9)) * 0.2) END,
       (queued_at AT TIME ZONE 'UTC')::date
  FROM (SELECT g,
               md5('org' || floor(200 * power(r1, 3))::int)::uuid AS org,
               (%(jobs)s::text[])[1 + (g %% 11)] AS job,
               (%(queues)s::text[])[1 + (g %% 11)] AS queue,
               CASE WHEN r2 < 0.03 THEN 'DEAD' WHEN r2 < 0.04 THEN 'RUNNING'
                    WHEN r2 < 0.05 THEN 'QUEUED' WHEN r2 < 0.055 THEN 'CANCELED'
                    WHEN r2 < 0.06 THEN 'FAILED' ELSE 'COMPLETED' END AS status,
               CASE WHEN g %% 50 = 0 THEN now() - r5 * interval '1 hour'
                    ELSE now() - interval '1 hour' - r5 * interval '30 days' END AS queued_at,
               r3, r4
          FROM (SELECT g, random() AS r1, random() AS r2, random() AS r3, random() AS r4,
                       random() AS r5
                  FROM generate_series(1, %(rows)s) AS g) AS raw) AS runs
"""

SIDE_TABLES = [
    """INSERT INTO outbox_events (org_id, type, job_name, job_id, payload, status, attempts, error,
                                  next_attempt_at, published_at)
       SELECT md5('org' || (g % 200))::uuid, 'bench', 'email:send', 'outbox-' || g, '{}',
              CASE WHEN g % 100 = 0 THEN 'FAILED' WHEN g % 20 = 0 THEN 'PENDING' ELSE 'PUBLISHED' END,
              g % 5, CASE WHEN g % 100 = 0 THEN 'BROKER_UNAVAILABLE: bench' END,
              now() + (g % 60) * interval '1 s', CASE WHEN g % 20 <> 0 THEN now() END
         FROM generate_series(1, 20000) AS g""",
    """INSERT INTO ai_usage (org_id, model, day, requests, tokens_in, tokens_out, cost)
       SELECT md5('org' || o)::uuid, m, current_date - d, 10 + o, 1000 * o, 100 * o, 0.001 * o
         FROM generate_series(0, 199) AS o, generate_series(0, 29) AS d,
              unnest(ARRAY['gpt-4o-mini', 'local-minilm']) AS m""",
    """INSERT INTO email_suppressions (org_id, email, reason)
       SELECT md5('org' || (g % 200))::uuid, 'user' || g || '@example.com',
              CASE WHEN g % 3 = 0 THEN 'BOUNCED' ELSE 'UNSUBSCRIBED' END
         FROM generate_series(1, 5000) AS g""",
    """INSERT INTO chain_actions (job_id, type, round_id, status, attempts)
       SELECT 'chain-' || g, (ARRAY['MINT_BADGE', 'CLAIM_PRIZE', 'CLAIM_REFUND'])[1 + g % 3], g / 10,
              (ARRAY['CONFIRMED', 'SENT', 'FAILED', 'ALREADY_DONE'])[1 + g % 4], 1
         FROM generate_series(1, 20000) AS g""",
    """INSERT INTO keeper_actions (chain_id, contract, ran_at, holder, outcome)
       SELECT 31337, '0x0000000000000000000000000000000000000001', now() - g * interval '10 s',
              'bench', (ARRAY['idle', 'draw_requested', 'paused'])[1 + g % 3]
         FROM generate_series(1, 20000) AS g""",
    """INSERT INTO console_audit (actor, action, target, count)
       SELECT 'ops', 'replay', 'bench ' || g, 1 FROM generate_series(1, 5000) AS g""",
]


#: Migration 0017_console_search's indexes (the search line's payload fields and error words).
SEARCH_INDEXES = ("ix_job_runs_console_payload", "ix_job_runs_console_error")


def generate(
    dsn: str,
    rows: int,
    *,
    console_indexes: bool = True,
    search_indexes: bool = True,
    executions_every: int = 0,
) -> dict[str, float]:
    timings: dict[str, float] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit TO off")
        conn.execute("SET maintenance_work_mem TO '256MB'")
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'job_runs'"
            " AND indexname NOT IN ('pk_job_runs', 'uq_job_runs_job_id_created_on')"
        ).fetchall()
        # The runs go back 31 days: a partition for each of those days (not the default one).
        conn.execute(
            "SELECT jobfleet_create_partitions(d - 31, d) FROM (SELECT (now() AT TIME ZONE 'UTC')::date AS d) t"
        )
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        t = time.perf_counter()
        conn.execute(
            GENERATE,
            {"rows": rows, "errors": ERRORS, "messages": MESSAGES,
             "jobs": [j for j, _ in JOBS], "queues": [q for _, q in JOBS]},
        )  # fmt: skip
        if executions_every:  # one start on the record for every n-th run
            conn.execute(
                "INSERT INTO job_executions (job_id, execution, attempt, worker, message_id,"
                " started_at) SELECT job_id, 1, attempt, 'bench:1:w', message_id, started_at"
                " FROM job_runs WHERE started_at IS NOT NULL AND abs(hashtext(job_id)) %% %s = 0",
                (executions_every,),
            )
        timings["insert_s"] = time.perf_counter() - t
        t = time.perf_counter()
        for name, definition in indexes:
            if not console_indexes and name.startswith(
                ("ix_job_runs_console", "ix_job_runs_finished_at_job")
            ):
                continue
            if not search_indexes and name in SEARCH_INDEXES:
                continue
            # A partitioned table's index is `ON ONLY` it: built on every partition here.
            conn.execute(definition.replace(" ON ONLY ", " ON ", 1))
        timings["indexes_s"] = time.perf_counter() - t
        for sql in SIDE_TABLES:
            conn.execute(sql)
        t = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        timings["vacuum_analyze_s"] = time.perf_counter() - t
    return timings


def roll_up(sandbox: Sandbox) -> float:
    """The scheduler's run-stats job once over the generated runs (its first pass: a day)."""
    from datetime import UTC, datetime

    from shared import run_stats
    from shared.runtime import Runtime

    runtime = Runtime(sandbox.settings)
    try:
        t = time.perf_counter()
        run_stats.roll_up(runtime, now=datetime.now(UTC))
        return time.perf_counter() - t
    finally:
        runtime.close()


def seed_nodes(sandbox: Sandbox, dsn: str) -> None:
    """Worker processes as they record themselves (`shared/broker/nodes.py`): 10 alive, one
    stale; each live one holds some of the RUNNING runs."""
    from shared.broker import nodes

    client = sandbox.redis()
    ns = sandbox.namespace
    now_ms = int(time.time() * 1000)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(11):
            queue = JOBS[i % len(JOBS)][1]
            node = nodes.Node(id=f"bench-node-{i}", host=f"host-{i % 3}", pid=1000 + i,
                              service=f"worker-{queue}", queues=[queue], threads=8,
                              started_ms=now_ms - 3_600_000, lease_owner=f"host-{i % 3}:{1000 + i}:b")  # fmt: skip
            client.hset(nodes.nodes_key(ns), node.id, json.dumps(node.__dict__))
            client.zadd(f"{ns}:__heartbeats__", {node.id: now_ms - (60_000 if i == 10 else 0)})
            conn.execute(
                "UPDATE job_runs SET lease_owner = %s WHERE id IN (SELECT id FROM job_runs"
                " WHERE status = 'RUNNING' AND queue = %s AND lease_owner IS NULL LIMIT 8)",
                (node.lease_owner, queue),
            )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_console(sandbox: Sandbox, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = sandbox.env(CONSOLE_PORT=str(port), CONSOLE_TOKEN=TOKEN, CONSOLE_HOST="127.0.0.1")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "shared.console"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the console exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the console did not get ready in 60 s")


def pages(dsn: str) -> dict[str, str]:
    """The URLs timed: every page, and the Runs/Dead-letters searches by each filter."""
    with psycopg.connect(dsn) as conn:
        big = conn.execute(
            "SELECT org_id FROM job_runs GROUP BY org_id ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()[0]  # type: ignore[index]
        small = conn.execute(
            "SELECT org_id FROM job_runs GROUP BY org_id ORDER BY count(*) LIMIT 1"
        ).fetchone()[0]  # type: ignore[index]
        one = conn.execute(
            "SELECT job_id, request_id, entity_id FROM job_runs WHERE request_id IS NOT NULL"
            " AND status = 'DEAD' LIMIT 1"
        ).fetchone()
        assert one is not None
        dead_g = one[0].split(":")[-2]  # the generated run's number, in its error text
    week_ago = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 7 * 86400))
    six_days = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 6 * 86400))
    return {
        "overview": "/",
        "overview (live part)": "/overview/live",
        "runs": "/runs",
        "runs: org (biggest)": f"/runs?org_id={big}",
        "runs: org (smallest)": f"/runs?org_id={small}",
        "runs: job name": "/runs?job_name=doc:ocr",
        "runs: status RUNNING": "/runs?status=RUNNING",
        "runs: request id": f"/runs?request_id={one[1]}",
        "runs: entity id": f"/runs?entity_id={one[2]}",
        "runs: time range (1 day)": f"/runs?since={week_ago}&until={six_days}",
        "runs: org+job+status": f"/runs?org_id={big}&job_name=ai:run&status=CANCELED",
        "runs: page 21 (deep)": "DEEP",
        "run": f"/runs/{one[0]}",
        "dead letters": "/dead",
        "dead: queue": "/dead?queue=doc",
        "dead: error code": "/dead?error_code=OCR_FAILED",
        "dead: org (smallest)": f"/dead?org_id={small}",
        "search: payload, one run": '/runs?q=payload.to:"user123457@example.com"',
        "search: payload, 1 in 1,000": "/runs?q=args.round_id:7",
        "search: payload, 1 in 5": "/runs?q=payload.template_key:welcome",
        "search: error words, rare": f'/runs?q="(run {dead_g})"',
        "search: error words, 1 in 3 dead": "/runs?q=refused",
        "search: status+payload+words": "/runs?q=status:DEAD payload.template_key:invoice refused",
        "search: negation+job": "/runs?q=-status:COMPLETED job:doc:ocr",
        "search: org+payload": f"/runs?q=org:{small} payload.template_key:reset",
        "charts: last hour": "/charts?range=hour",
        "charts: last hour (live part)": "/charts/live?range=hour",
        "charts: last day": "/charts?range=day",
        "nodes": "/nodes",
        "outbox": "/outbox",
        "tenants": "/tenants",
        "chain": "/chain",
        "audit": "/audit",
    }


def deep_url(client: httpx.Client, depth: int = 20) -> str:
    url = "/runs"
    for _ in range(depth):
        page = client.get(url).text
        found = re.search(r'href="([^"]*cursor=[^"]+)" rel="next"', page)
        assert found, "no next page"
        url = "/runs" + found.group(1).replace("&amp;", "&")
    return url


def time_page(client: httpx.Client, url: str, requests: int) -> dict[str, Any]:
    """`requests` GETs of `url` after 5 warm-up ones: the server's own time (its Server-Timing
    header: from the request reaching the app to the response leaving it) and the client's."""
    for _ in range(5):
        client.get(url)
    server, seen = [], []
    size = 0
    for _ in range(requests):
        t = time.perf_counter()
        answer = client.get(url)
        seen.append((time.perf_counter() - t) * 1000)
        assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
        timing = re.search(r"app;dur=([0-9.]+)", answer.headers.get("server-timing", ""))
        assert timing, "no Server-Timing header"
        server.append(float(timing.group(1)))
        size = len(answer.content)

    def p95(samples: list[float]) -> float:
        samples = sorted(samples)
        return samples[min(len(samples) - 1, round(0.95 * len(samples)) - 1)]

    return {"p50_ms": round(sorted(server)[len(server) // 2], 1), "p95_ms": round(p95(server), 1),
            "max_ms": round(max(server), 1), "client_p95_ms": round(p95(seen), 1), "bytes": size,
            "ok": p95(server) <= TARGET_MS}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument(
        "--without-console-indexes",
        action="store_true",
        help="leave out the indexes of migration 0013_console (the before figure)",
    )
    parser.add_argument(
        "--without-search-indexes",
        action="store_true",
        help="leave out the indexes of migration 0017_console_search",
    )
    parser.add_argument("--only", default="",
                        help="time only the pages whose name contains this (e.g. search)")  # fmt: skip
    args = parser.parse_args()
    sandbox = Sandbox(Settings())
    log = Path(tempfile.mkdtemp(prefix="bench-console-")) / "console.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        sandbox.create()
        load = generate(sandbox.dsn, args.rows, console_indexes=not args.without_console_indexes,
                        search_indexes=not args.without_search_indexes)  # fmt: skip
        load["run_stats_roll_up_s"] = roll_up(sandbox)
        seed_nodes(sandbox, sandbox.dsn)
        print(f"generated {args.rows:,} runs: " + ", ".join(f"{k} {v:.1f}" for k, v in load.items()),
              file=sys.stderr)  # fmt: skip
        port = free_port()
        proc = start_console(sandbox, port, log)
        urls = {k: v for k, v in pages(sandbox.dsn).items() if args.only in k}
        results: dict[str, Any] = {}
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30
        ) as client:
            for name, url in urls.items():
                if url == "DEEP":
                    url = deep_url(client)
                results[name] = time_page(client, url, args.requests)
                r = results[name]
                print(f"{name:34} p50 {r['p50_ms']:7.1f} ms  p95 {r['p95_ms']:7.1f} ms  max {r['max_ms']:7.1f} ms"
                      f"  (client p95 {r['client_p95_ms']:7.1f})  {r['bytes']:7,} B"
                      f"  {'ok' if r['ok'] else 'OVER ' + str(TARGET_MS) + ' ms'}")  # fmt: skip
        summary = {
            "bench": "console pages", "rows": args.rows, "requests_per_page": args.requests,
            "console_indexes": not args.without_console_indexes,
            "search_indexes": not args.without_search_indexes, "target_p95_ms": TARGET_MS,
            "timed": "server side (Server-Timing), client p95 beside it",
            "load": {k: round(v, 1) for k, v in load.items()}, "cpus": os.cpu_count(),
            "pages": results, "all_within_target": all(r["ok"] for r in results.values()),
        }  # fmt: skip
        print(json.dumps(summary, indent=2))
        return 0 if summary["all_within_target"] else 1
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        sandbox.destroy()


if __name__ == "__main__":
    raise SystemExit(main())
