"""Dedup under contention: many producers sending one job id enqueue it once; it runs once."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.procs import ROOT, Procs
from tests.support.queues import queued
from tests.support.wait import wait_for, wait_run

PROCESSES, THREADS, SENDS = 2, 4, 125  # 2 x 4 threads x 125 = 1,000 sends


@pytest.mark.slow
def test_a_thousand_concurrent_sends_of_one_job_id_enqueue_one_message_that_runs_once(
    runtime, procs: Procs, marks: Path, db, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    org = uuid.uuid4()
    payload = {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "only once"}
    go = tmp_path / "go"
    producers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.send_burst",
                json.dumps(payload),
                str(THREADS),
                str(SENDS),
                str(go),
            ],
            cwd=ROOT,
            env=procs.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for p in producers:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "ready", p.stderr.read() if p.stderr else ""
        go.touch()  # both processes start their 4 threads together
        outputs = [p.communicate(timeout=60) for p in producers]
    finally:
        for p in producers:
            p.kill() if p.poll() is None else None
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]

    assert [r["errors"] for r in reports] == [[], []]
    assert sum(r["new"] for r in reports) == 1
    assert sum(r["new"] + r["duplicate"] for r in reports) == PROCESSES * THREADS * SENDS
    job_ids = {j for r in reports for j in r["job_ids"]}
    message_ids = {m for r in reports for m in r["message_ids"]}
    assert len(job_ids) == 1 and len(message_ids) == 1
    (job_id,) = job_ids

    rows = db.execute("SELECT status, message_id FROM job_runs").fetchall()
    assert rows == [("QUEUED", next(iter(message_ids)))]
    ns = runtime.settings.broker_namespace
    assert queued(runtime.broker.client, ns, "testq") == 1
    assert runtime.broker.client.hlen(f"{ns}:testq.msgs") == 1

    request.getfixturevalue("fleet")  # now a worker consumes testq
    run = wait_run(job_id, "COMPLETED", org_id=org)
    assert run.attempt == 1
    wait_for(
        lambda: runtime.broker.client.hlen(f"{ns}:testq.msgs") == 0, what="the message acknowledged"
    )
    assert marks.read_text().splitlines() == [f"echo {job_id} 1"]
