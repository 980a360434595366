"""End to end: a requested export goes through the outbox to the export worker (real Redis,
fleet middleware), is stored, and `fleet export url` gives a link that downloads it; an
operator's cancel stops a running export and leaves no object; an S3 export goes up in parts."""

from __future__ import annotations

import hashlib
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import psycopg
import pytest
from typer.testing import CliRunner

from shared.jobs import runs
from shared.jobs.statuses import TERMINAL_STATUSES as TERMINAL
from shared.outbox import relay_once
from shared.storage.backends.s3 import S3Backend
from tests.support.wait import wait_for
from tests.workers.export.conftest import ExportWorker, job_context, seed_ledger
from tests.workers.export.test_build import new_export, read_csv
from workers.export import registry
from workers.export.build import build_export
from workers.export.cli import app
from workers.export.downloads import links_app
from workers.export.registry import Column, ExportType
from workers.export.requests import request_export
from workers.export.wiring import Exporter, build_exporter


def status(db: psycopg.Connection[Any], export_id: uuid.UUID) -> str | None:
    row = db.execute("SELECT status FROM exports WHERE id = %s", (export_id,)).fetchone()
    return row[0] if row else None


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_requested_export_is_built_by_the_worker_and_downloadable_by_its_link(
    export_worker: ExportWorker, db: psycopg.Connection[Any]
) -> None:
    org, by = uuid.uuid4(), uuid.uuid4()
    seed_ledger(db, org, 2_000)
    export_id, job_id = request_export(
        export_worker.runtime, org_id=org, requested_by=by, type="ACCOUNTING"
    )
    relay_once(export_worker.runtime, now=datetime.now(UTC))
    run = wait_for(
        lambda: (r := runs.find(job_id, org_id=org)) and r.status == "COMPLETED" and r, timeout=30
    )
    assert run.result["rows"] == 2_000 and status(db, export_id) == "COMPLETED"

    storage = export_worker.exporter.storage
    server = make_server("127.0.0.1", 0, links_app(storage), handler_class=_Quiet)
    storage.link_base_url = f"http://127.0.0.1:{server.server_port}/files"  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = CliRunner().invoke(app, ["url", str(export_id), "--org", str(org), "--ttl", "60"])
        assert result.exit_code == 0, result.output
        link = result.output.strip()
        with urllib.request.urlopen(link) as answer:
            assert answer.read() == storage.read(run.result["key"])
        wrong_org = CliRunner().invoke(app, ["url", str(export_id), "--org", str(uuid.uuid4())])
        assert wrong_org.exit_code != 0 and "no export" in str(wrong_org.exception)
    finally:
        server.shutdown()


@pytest.mark.slow
def test_operator_cancel_stops_a_running_export_and_leaves_no_object(
    export_worker: ExportWorker, db: psycopg.Connection[Any], request: pytest.FixtureRequest
) -> None:
    slow = ExportType(  # each row waits 1 ms in Postgres: ~20 s in all, so a cancel lands mid-way
        name="TEST_SLOW_LEDGER",
        title="slow",
        source="ledger_entries",
        table="ledger_entries",
        columns=(Column("label", "label"), Column("pause", "pg_sleep(0.001)::text")),
        order_by="id",
    )
    if "TEST_SLOW_LEDGER" not in registry.names():
        registry.register(slow)
        request.addfinalizer(lambda: registry.unregister("TEST_SLOW_LEDGER"))
    org = uuid.uuid4()
    seed_ledger(db, org, 20_000)
    export_id, job_id = request_export(
        export_worker.runtime, org_id=org, requested_by=uuid.uuid4(), type="TEST_SLOW_LEDGER"
    )
    relay_once(export_worker.runtime, now=datetime.now(UTC))
    wait_for(
        lambda: (r := runs.find(job_id, org_id=org)) and (r.progress or {}).get("done", 0) > 0,
        timeout=30,
    )
    assert runs.cancel(job_id, org_id=org) == "CANCEL_REQUESTED"
    run = wait_for(
        lambda: (r := runs.find(job_id, org_id=org)) and r.status == "CANCELED" and r, timeout=15
    )
    assert run.progress["done"] < 20_000
    assert status(db, export_id) == "CANCELED"
    storage = export_worker.exporter.storage
    assert storage.list_keys("orgs") == [] and storage.pending() == []


def test_an_s3_export_is_uploaded_in_parts_with_a_matching_file_object(
    runtime: Any, s3_storage: S3Backend, db: psycopg.Connection[Any]
) -> None:
    exporter: Exporter = build_exporter(runtime, storage=s3_storage)
    org = uuid.uuid4()
    seed_ledger(db, org, 100_000)  # ~7.5 MB of CSV: two parts of at most 5 MiB
    job = job_context(org)
    result = build_export(new_export(db, org), job, exporter)
    assert job.checkpoint["upload"]["upload_id"], "the multipart upload id was checkpointed"
    assert result["size_bytes"] > 5 * 1024 * 1024 and s3_storage.pending() == []
    fo = db.execute(
        "SELECT provider, bucket, size_bytes, sha256 FROM file_objects WHERE org_id = %s", (org,)
    ).fetchone()
    assert fo == ("S3", s3_storage.bucket, result["size_bytes"], result["sha256"])
    assert hashlib.sha256(s3_storage.read(result["key"])).hexdigest() == result["sha256"]


def test_an_unfiltered_job_runs_export_leaves_out_its_own_running_job(
    export_worker: ExportWorker, db: psycopg.Connection[Any]
) -> None:
    org = uuid.uuid4()
    for i, state in enumerate(("COMPLETED", "DEAD")):
        db.execute(
            "INSERT INTO job_runs (org_id, job_name, job_id, queue, status) "
            "VALUES (%s, 'email:send', %s, 'email', %s)",
            (org, f"{org}:email:send:{i}", state),
        )
    earlier, earlier_job = request_export(
        export_worker.runtime, org_id=org, requested_by=uuid.uuid4(), type="ACCOUNTING"
    )
    _, job_id = request_export(
        export_worker.runtime, org_id=org, requested_by=uuid.uuid4(), type="JOB_RUNS"
    )
    relay_once(export_worker.runtime, now=datetime.now(UTC))
    run = wait_for(
        lambda: (r := runs.find(job_id, org_id=org)) and r.status == "COMPLETED" and r, timeout=30
    )
    wait_for(lambda: status(db, earlier) == "COMPLETED", timeout=30)

    listed = [row[0] for row in read_csv(export_worker.exporter.storage, run.result["key"])[1:]]
    assert job_id not in listed, "the export lists its own job, RUNNING while it writes"
    assert {f"{org}:email:send:0", f"{org}:email:send:1"} <= set(listed)
    assert run.result["rows"] == len(listed)
    assert earlier_job in listed, "another export's job is listed like any other"


@pytest.mark.slow
def test_an_export_requested_with_via_send_is_never_run_before_its_commit(
    export_worker: ExportWorker, db: psycopg.Connection[Any]
) -> None:
    """Issue 30: 10 exports through `request_export(..., via="send")` then the caller's commit,
    with the worker running: 6 of 10 used to die NOT_FOUND (the job ran before the row it needs
    was committed). Now the job is published after the commit: 10 of 10 complete."""
    from workers.export.client import request_export as request_in_session

    org, by = uuid.uuid4(), uuid.uuid4()
    seed_ledger(db, org, 20)
    requests = []
    for _ in range(10):
        with export_worker.runtime.sessions() as session, session.begin():
            requests.append(
                request_in_session(
                    session, org_id=org, requested_by=by, type="ACCOUNTING", via="send"
                )
            )
            session.flush()
            time.sleep(0.05)  # the caller's own work, after the request and before its commit
    for request in requests:
        run = wait_for(
            lambda r=request: (x := runs.find(r.job_id, org_id=org)) and x.status in TERMINAL and x,
            timeout=30,
        )
        assert (run.status, run.error_code) == ("COMPLETED", None), run.error
        assert status(db, request.export_id) == "COMPLETED"


@pytest.mark.slow
def test_export_build_sent_by_its_catalog_name_creates_its_row_and_completes(
    export_worker: ExportWorker, db: psycopg.Connection[Any]
) -> None:
    """Any language may send `export:build` by name: the worker creates the `exports` row from
    the payload (it used to end DEAD NOT_FOUND)."""
    from shared.jobs import catalog

    org, export_id = uuid.uuid4(), uuid.uuid4()
    seed_ledger(db, org, 5)
    sent = catalog.EXPORT_BUILD.send(
        {
            "org_id": str(org),
            "entity_id": str(export_id),
            "requested_by": str(uuid.uuid4()),
            "type": "ACCOUNTING",
            "params": {"format": "CSV"},
        }
    )
    run = wait_for(
        lambda: (x := runs.find(sent.job_id, org_id=org)) and x.status in TERMINAL and x,
        timeout=30,
    )
    assert (run.status, run.error_code) == ("COMPLETED", None), run.error
    assert status(db, export_id) == "COMPLETED" and run.result["rows"] == 5
