"""The `fleet` console script end to end: a real process against this session's Postgres and Redis."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.cli import schemas
from shared.jobs import catalog, runs
from tests.support.env import test_env as session_env
from tests.support.jobs import ECHO
from tests.support.queues import queued_ids
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

FLEET = Path(sys.executable).with_name("fleet")
SNAPSHOTS = Path(__file__).parents[1] / "contracts" / "schemas"


def fleet(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **session_env(), "COLUMNS": "200", **(env or {})}
    full_env.pop("FLEET_DEBUG", None)
    return subprocess.run(
        [str(FLEET), *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = fleet(*args, **kwargs)
    assert done.returncode == 0, (
        f"fleet {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done


def as_json(*args: str) -> Any:
    return json.loads(ok(*args, "--json").stdout)


def fails(code: int, *args: str, **kwargs: Any) -> str:
    """Run a command that must fail with `code` and one error line (no traceback); its stderr."""
    done = fleet(*args, **kwargs)
    assert done.returncode == code, (
        f"expected exit {code}, got {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    return lines[0]


def usage_error(*args: str) -> str:
    """Run a command rejected by argument parsing (exit 2, click's usage message); its stderr."""
    done = fleet(*args)
    assert done.returncode == 2, (
        f"expected exit 2, got {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    assert "Traceback" not in done.stderr
    return done.stderr


def email_payload(org: uuid.UUID | None = None, key: str = "welcome") -> dict[str, Any]:
    return {
        "v": 1,
        "org_id": str(org or uuid.uuid4()),
        "entity_id": str(uuid.uuid4()),
        "template_key": key,
        "recipient_email": "ana@example.com",
        "variables": {"first_name": "Zoë"},
    }


def insert_dead(
    db: Any,
    *,
    died_ago: timedelta = timedelta(hours=1),
    queue: str = "email",
    payload: dict[str, Any] | None = None,
) -> str:
    payload = payload or email_payload()
    spec = catalog.EMAIL_SEND
    model = spec.build(payload)
    job_id = spec.job_id(model)
    db.execute(
        """INSERT INTO job_runs (org_id, job_name, job_id, queue, status, entity_type, entity_id, payload,
               error_code, error, attempt, max_attempts, queued_at, started_at, finished_at)
           VALUES (%s, %s, %s, %s, 'DEAD', %s, %s, %s, 'SMTP_REJECTED', '550 mailbox unavailable', 3, 3,
                   now() - %s, now() - %s, now() - %s)""",
        (
            model.org_id,
            spec.name,
            job_id,
            queue,
            spec.entity_type,
            str(model.entity_id),
            json.dumps(model.wire()),
            died_ago,
            died_ago,
            died_ago,
        ),
    )
    return job_id


def queued_messages(runtime: Any, queue: str) -> list[dict[str, Any]]:
    client = runtime.broker.client
    ns = runtime.settings.broker_namespace
    ids = queued_ids(client, ns, queue)
    return [json.loads(client.hget(f"{ns}:{queue}.msgs", i)) for i in ids]


# -- contracts ------------------------------------------------------------------------------


def test_contracts_export_writes_one_schema_per_job_version_and_an_index(tmp_path: Path) -> None:
    ok("contracts", "export", str(tmp_path / "out"))
    written = {p.name: json.loads(p.read_text("utf-8")) for p in (tmp_path / "out").iterdir()}
    assert written == schemas.documents(catalog.ALL)
    assert "email.send.v1.schema.json" in written and "email-seq.run_due.v1.schema.json" in written
    assert written["index.json"]["email:send"] | {"files": None} == {
        "queue": "email",
        "versions": [1],
        "latest": 1,
        "files": None,
        "entity_type": "scheduled_email",
        "job_id": {
            "form": "hash",
            "entity": "entity_id",
            "hashed": ["entity_id", "template_key", "recipient_email"],
        },
    }
    assert written["email.send.v1.schema.json"]["$schema"].endswith("2020-12/schema")
    listed = as_json("contracts", "list")
    assert set(listed) == set(catalog.BY_NAME) and listed["chain:mint_badge"]["job_id"] == "custom"


def test_contracts_check_passes_on_the_snapshot_and_fails_on_an_incompatible_change(
    tmp_path: Path,
) -> None:
    ok("contracts", "check", str(SNAPSHOTS))
    changed = tmp_path / "snap"
    shutil.copytree(SNAPSHOTS, changed)
    path = changed / "ai.run.v1.schema.json"
    document = json.loads(path.read_text("utf-8"))
    document["properties"]["task"]["enum"].append("translate")  # the current one accepts less
    path.write_text(json.dumps(document), "utf-8")
    done = fleet("contracts", "check", str(changed))
    assert done.returncode == 1
    assert "incompatible" in done.stdout and "['translate'] are no longer accepted" in done.stdout


# -- jobs -----------------------------------------------------------------------------------


def test_jobs_send_validates_enqueues_once_and_show_displays_the_run(
    runtime: Any, tmp_path: Path
) -> None:
    payload = email_payload()
    sent = as_json(
        "jobs", "send", "email:send", "--payload", json.dumps(payload), "--request-id", "req-cli"
    )
    assert sent["duplicate"] is False and sent["status"] == "QUEUED"
    assert sent["job_id"] == catalog.EMAIL_SEND.job_id(catalog.EMAIL_SEND.build(payload))
    file = tmp_path / "payload.json"
    file.write_text(json.dumps(payload), "utf-8")
    again = as_json("jobs", "send", "email:send", "--payload", f"@{file}")
    assert again["duplicate"] is True and again["job_id"] == sent["job_id"]
    assert [m["options"]["job_id"] for m in queued_messages(runtime, "email")] == [sent["job_id"]]

    shown = as_json("jobs", "show", sent["job_id"], "--all-orgs")
    assert shown["status"] == "QUEUED" and shown["request_id"] == "req-cli"
    assert shown["payload"]["variables"] == {"first_name": "Zoë"} and shown["replays"] == []
    assert shown["queued_at"][:4].isdigit() and "T" in shown["queued_at"]  # ISO-8601
    human = ok("jobs", "show", sent["job_id"], "--all-orgs").stdout
    assert sent["job_id"] in human and "QUEUED" in human
    listed = as_json("jobs", "list", "--status", "queued", "--job", "email:send")
    assert [r["job_id"] for r in listed] == [sent["job_id"]]
    assert sent["job_id"] in ok("jobs", "list").stdout


def test_an_invalid_payload_is_one_red_line_with_the_field_path_and_exit_2(runtime: Any) -> None:
    payload = {**email_payload(), "entity_id": "not-a-uuid", "cc": "x@example.com"}
    line = fails(2, "jobs", "send", "email:send", "--payload", json.dumps(payload))
    assert "entity_id" in line and "cc" in line
    assert "unknown job" in fails(2, "jobs", "send", "email:nope", "--payload", "{}")
    assert queued_messages(runtime, "email") == []


def test_jobs_cancel_cancels_a_queued_run_once_and_scopes_by_org(runtime: Any) -> None:
    org = uuid.uuid4()
    sent = ECHO.send({"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "later"})
    wait_for(lambda: runs.find(sent.job_id, org_id=org), what="the QUEUED row")
    assert "no run" in fails(1, "jobs", "cancel", sent.job_id, "--org", str(uuid.uuid4()))
    assert as_json("jobs", "cancel", sent.job_id, "--org", str(org)) == {
        "job_id": sent.job_id,
        "status": "CANCELED",
    }
    assert "is CANCELED" in fails(1, "jobs", "cancel", sent.job_id, "--all-orgs")
    assert "no run" in fails(1, "jobs", "show", sent.job_id, "--org", str(uuid.uuid4()))


# -- dlq ------------------------------------------------------------------------------------


def test_dlq_list_show_and_a_dry_run_replay_change_nothing(runtime: Any, db: Any) -> None:
    job_id = insert_dead(db)
    listed = as_json("dlq", "list", "--queue", "email")
    assert [r["job_id"] for r in listed] == [job_id] and listed[0]["error_code"] == "SMTP_REJECTED"
    assert as_json("dlq", "list", "--queue", "doc") == []
    assert as_json("dlq", "list", "--org", str(uuid.uuid4())) == []
    shown = as_json("dlq", "show", job_id, "--all-orgs")
    assert shown["error"] == "550 mailbox unavailable" and shown["attempt"] == 3
    assert "550 mailbox unavailable" in ok("dlq", "show", job_id, "--all-orgs").stdout

    dry = as_json("dlq", "replay", job_id, "--all-orgs", "--dry-run")
    assert dry["dry_run"] is True and [r["job_id"] for r in dry["replayed"]] == [job_id]
    assert runs.find(job_id, org_id=None).status == "DEAD"  # type: ignore[union-attr]
    assert queued_messages(runtime, "email") == []


@pytest.mark.parametrize("width", [80, 200])
def test_the_lists_of_runs_read_at_80_columns_with_their_org_and_whole_ids(
    runtime: Any, db: Any, width: int
) -> None:
    """Issue 32: at 80 columns a job id was folded over ten lines of its table column."""
    org = uuid.uuid4()
    dead = insert_dead(db, payload=email_payload(org))
    sent = catalog.EMAIL_SEND.send(email_payload(org))
    for argv, job_id in (
        (("jobs", "list", "--org", str(org)), sent.job_id),
        (("dlq", "list"), dead),
    ):
        text = ok(*argv, env={"COLUMNS": str(width)}).stdout
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= width, text
        assert str(org) in text, text  # an org column (or line)
        if width == 80:  # the id whole, on two lines at most
            assert job_id in "".join(line.strip() for line in lines), text
            assert sum(1 for line in lines if line.strip() and line.strip() in job_id) <= 2, text


def test_every_command_on_one_job_id_takes_the_org_or_an_explicit_all_orgs(
    runtime: Any, db: Any
) -> None:
    """Before: `fleet dlq replay` had no --org, and show/cancel fell back to every org."""
    job_id = insert_dead(db)
    org = job_id.split(":", 1)[0]
    for command in (("jobs", "show"), ("jobs", "cancel"), ("dlq", "show"), ("dlq", "replay")):
        assert "--all-orgs" in usage_error(*command, job_id)
    assert "not both" in usage_error("dlq", "replay", job_id, "--org", org, "--all-orgs")
    other = str(uuid.uuid4())
    assert "no run" in fails(1, "dlq", "replay", job_id, "--org", other)
    assert "no run" in fails(1, "dlq", "show", job_id, "--org", other)
    assert as_json("dlq", "replay", "--all", "--queue", "email", "--org", other)["replayed"] == []
    assert queued_messages(runtime, "email") == []
    done = as_json("dlq", "replay", job_id, "--org", org)
    assert [r["job_id"] for r in done["replayed"]] == [job_id]


def test_a_planted_secret_reaches_no_view_of_a_run(runtime: Any, db: Any) -> None:
    """DESIGN §8: secrets in payloads are redacted in every view, as in the logs (before:
    `jobs show`, `dlq show` and the --json lists printed the payload in full)."""
    secret = f"planted-{uuid.uuid4().hex}"
    payload = email_payload()
    payload["variables"] = {
        "first_name": "Ada",
        "token": secret,
        "deep": [{"api_key": secret}],
        # Masking by key name alone showed these (issue 31): tokens inside URLs.
        "reset_link": f"https://app.example/reset?t={secret}",
        "feed": f"https://ada:{secret}@feeds.example/f",
    }
    job_id = insert_dead(db, payload=payload)
    db.execute(
        "UPDATE job_runs SET error = %s WHERE job_id = %s",
        (f"HTTPError: 401 for https://api.example/v1?key={secret}", job_id),
    )
    debug = {"FLEET_LOG_LEVEL": "DEBUG"}
    outputs = [
        fleet(*command, env=debug)
        for command in (
            ("jobs", "show", job_id, "--all-orgs"),
            ("jobs", "show", job_id, "--all-orgs", "--json"),
            ("dlq", "show", job_id, "--all-orgs"),
            ("dlq", "show", job_id, "--all-orgs", "--json"),
            ("jobs", "list"),
            ("jobs", "list", "--json"),
            ("dlq", "list"),
            ("dlq", "list", "--json"),
        )
    ]
    for done in outputs:
        assert done.returncode == 0, done.stderr
        assert secret not in done.stdout + done.stderr, " ".join(done.args)
    shown = json.loads(outputs[1].stdout)["payload"]["variables"]
    assert shown == {
        "first_name": "Ada",
        "token": "***",
        "deep": [{"api_key": "***"}],
        "reset_link": "https://app.example/reset?t=***",
        "feed": "https://ada:***@feeds.example/f",
    }
    assert json.loads(outputs[7].stdout)[0]["payload"]["variables"]["token"] == "***"


def test_dlq_replay_keeps_the_job_id_resets_attempts_and_audits_who(runtime: Any, db: Any) -> None:
    job_id = insert_dead(db)
    done = as_json("dlq", "replay", job_id, "--all-orgs", "--by", "ops-alice")
    assert done["by"] == "ops-alice" and done["replayed"][0]["job_id"] == job_id
    messages = queued_messages(runtime, "email")
    assert [m["options"]["job_id"] for m in messages] == [job_id]
    assert messages[0]["message_id"] == done["replayed"][0]["message_id"]
    run = runs.find(job_id, org_id=None)
    assert run is not None
    assert (run.status, run.attempt, run.replay_count, run.replayed_by) == (
        "QUEUED",
        0,
        1,
        "ops-alice",
    )
    assert run.replayed_at is not None
    audit = db.execute(
        "SELECT replayed_by, previous_error_code, previous_attempt FROM job_replays WHERE job_id = %s",
        (job_id,),
    ).fetchall()
    assert audit == [("ops-alice", "SMTP_REJECTED", 3)]
    assert as_json("jobs", "show", job_id, "--all-orgs")["replays"][0]["replayed_by"] == "ops-alice"
    assert "only DEAD runs" in fails(1, "dlq", "replay", job_id, "--all-orgs")


def test_dlq_replay_all_needs_a_queue_and_replays_only_that_queue(runtime: Any, db: Any) -> None:
    mine = {insert_dead(db), insert_dead(db)}
    other = insert_dead(db, queue="export")
    assert "--all needs --queue" in usage_error("dlq", "replay", "--all")
    assert "either a JOB_ID or --all" in usage_error("dlq", "replay")
    done = as_json("dlq", "replay", "--all", "--queue", "email", "--all-orgs")
    assert {r["job_id"] for r in done["replayed"]} == mine
    assert done["by"].endswith(f"@{socket.gethostname()}")  # the default operator: $USER@host
    assert {m["options"]["job_id"] for m in queued_messages(runtime, "email")} == mine
    assert runs.find(other, org_id=None).status == "DEAD"  # type: ignore[union-attr]


def test_a_really_dead_job_replayed_from_the_cli_runs_again(fleet: Any) -> None:
    org = uuid.uuid4()
    sent = fleet.jobs["echo"].send(
        {"org_id": str(org), "entity_id": str(uuid.uuid4()), "message": "permanent"}
    )
    dead = wait_for(
        lambda: (r := runs.find(sent.job_id, org_id=org)) and r.status == "DEAD" and r, what="DEAD"
    )
    assert dead.error_code == "TEST_PERMANENT"
    ok("dlq", "replay", sent.job_id, "--org", str(org), "--by", "ops-bob")
    again = wait_for(
        lambda: (
            (r := runs.find(sent.job_id, org_id=org))
            and r.status == "DEAD"
            and r.replay_count == 1
            and r
        ),
        what="the replay to run and die again",
    )
    assert again.attempt == 1 and again.replayed_by == "ops-bob" and again.job_id == sent.job_id


def test_dlq_purge_deletes_only_runs_dead_longer_than_the_age(runtime: Any, db: Any) -> None:
    old = insert_dead(db, died_ago=timedelta(days=40))
    recent = insert_dead(db, died_ago=timedelta(days=2))
    assert "not a duration" in usage_error("dlq", "purge", "--older-than", "30x")
    purged = as_json("dlq", "purge", "--older-than", "30d")
    assert purged["purged"] == 1
    assert runs.find(old, org_id=None) is None and runs.find(recent, org_id=None) is not None
    assert "purged 1" in ok("dlq", "purge", "--older-than", "1d12h").stdout
    assert runs.find(recent, org_id=None) is None


# -- outbox ---------------------------------------------------------------------------------


def _stage_event(runtime: Any) -> tuple[str, str]:
    from shared import outbox

    with runtime.sessions() as session:
        event = outbox.enqueue(session, catalog.EMAIL_SEND, email_payload())
        session.commit()
        return str(event.id), event.job_id


def test_outbox_relay_once_publishes_committed_events(runtime: Any) -> None:
    event_id, job_id = _stage_event(runtime)
    assert [e["id"] for e in as_json("outbox", "list", "--status", "pending")] == [event_id]
    stats = as_json("outbox", "relay", "--once")
    assert stats["published"] == 1 and stats["claimed"] == 1
    published = as_json("outbox", "list", "--status", "PUBLISHED")
    assert [e["id"] for e in published] == [event_id]
    assert [m["options"]["job_id"] for m in queued_messages(runtime, "email")] == [job_id]
    assert as_json("outbox", "relay", "--once")["claimed"] == 0


def test_outbox_relay_loop_publishes_and_stops_cleanly_on_ctrl_c(runtime: Any) -> None:
    env = {**os.environ, **session_env(), "LOG_FORMAT": "console"}
    proc = subprocess.Popen(
        [str(FLEET), "outbox", "relay", "--interval", "0.2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, job_id = _stage_event(runtime)
        wait_for(lambda: queued_messages(runtime, "email"), timeout=15, what="the relay to publish")
        assert [m["options"]["job_id"] for m in queued_messages(runtime, "email")] == [job_id]
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert "relay stopped" in stderr and "Traceback" not in stderr


# -- settings, database, domains -------------------------------------------------------------


def test_config_shows_settings_and_hides_every_secret() -> None:
    secrets = {
        "DATABASE_URL": "postgresql+psycopg://app:pg-s3cret-pw@db.internal:5432/jobfleet?sslpassword=ssl-s3cret",
        "REDIS_URL": "redis://:redis-s3cret@cache.internal:6379/0",
        "METRICS_TOKEN": "metrics-s3cret-token",
    }
    human = ok("config", env=secrets).stdout
    data = json.loads(ok("config", "--json", env=secrets).stdout)
    shown = human + json.dumps(data)
    for secret in ("pg-s3cret-pw", "ssl-s3cret", "redis-s3cret", "metrics-s3cret-token"):
        assert secret not in shown
    assert (
        data["database_url"]
        == "postgresql+psycopg://app:***@db.internal:5432/jobfleet?sslpassword=***"
    )
    assert data["redis_url"] == "redis://:***@cache.internal:6379/0"
    assert data["metrics_token"] == "***"
    assert "DATABASE_URL" in human and "db.internal" in human


def test_db_upgrade_is_idempotent(database: str) -> None:
    assert "upgraded to heads" in ok("db", "upgrade").stdout


def test_unreachable_postgres_is_one_line_not_a_traceback() -> None:
    line = fails(
        1,
        "db",
        "upgrade",
        env={"DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/nothing"},
    )
    assert line.startswith("error: postgres:")


def test_importing_the_cli_imports_only_the_domains_registrations() -> None:
    code = "import sys, shared.cli.main; print(sorted(m for m in sys.modules if m.split('.')[0] == 'workers'))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **session_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # The domains' registrations (plain data, shared/domains.py) and their packages, which
    # boot nothing: no CLI, client, store or app module of a worker.
    loaded = set(ast.literal_eval(done.stdout.strip()))
    domains = ("email", "ai", "export", "doc", "chain_actions")
    allowed = {"workers"} | {f"workers.{d}" for d in domains}
    allowed |= {f"workers.{d}.registration" for d in domains}
    assert loaded <= allowed, sorted(loaded - allowed)
    assert "workers.email.registration" in loaded  # the registrations were read


def test_fleet_status_exits_non_zero_when_a_section_cannot_be_read(runtime: Any) -> None:
    """Before: every section degraded to an error line and the command still exited 0."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nowhere = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"  # nothing listens there
    done = fleet("status", "--json", env={"REDIS_URL": nowhere})
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)  # the report is still printed, whole
    assert "error" in report["queues"] and "error" in report["workers"]["heartbeats"]
    assert "error" not in report["outbox"]  # what could be read was
    assert "queues" in done.stderr and "workers.heartbeats" in done.stderr
    human = fleet("status", env={"REDIS_URL": nowhere})
    assert human.returncode == 1 and "outbox" in human.stdout
