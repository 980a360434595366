"""The Node.js producer kit (clients/node) against the real thing (issue 39): its own tests (every
id vector, random payloads of every job against the Python producers), its Zod schemas against
the contracts as Python declares them now, sends that deduplicate with the Python producers under
concurrency, staging in a node-postgres transaction, and the NestJS example API whose jobs run
to COMPLETED on real workers, followed through the fleet's job-status API."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared import outbox
from shared.cli.schemas import documents, dumps
from shared.config import Settings
from shared.jobs import catalog
from shared.runtime import Runtime
from tests.support.env import test_env
from tests.support.procs import Proc, free_port
from tests.support.relay import relaying
from tests.support.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "clients" / "node"
DIST = KIT / "dist"

pytestmark = pytest.mark.slow


def node() -> str:
    found = shutil.which("node")
    assert found, "node is needed (the project's npm tooling installs it)"
    assert (DIST / "src" / "index.js").exists(), "clients/node is not built: `make install`"
    return found


def run_node(*argv: str, stdin: str = "", env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [node(), *argv],
        input=stdin, capture_output=True, text=True, timeout=120, cwd=KIT,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert done.returncode == 0, (
        f"node {argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def test_the_kits_own_tests_pass_every_vector_and_random_payloads_against_python() -> None:
    files = sorted(str(p.relative_to(KIT)) for p in (DIST / "test").glob("*.test.js"))
    assert len(files) == 2, files
    out = run_node("--test", *files, env={"JOBFLEET_PYTHON": sys.executable})
    assert "# fail 0" in out and "# pass 10" in out, out


def test_the_zod_schemas_follow_the_contracts_python_declares(tmp_path: Path) -> None:
    """Exported from the Python contracts as they are now, not from the snapshot: a contract
    changed in Python without `npm run generate` fails, naming the command."""
    exported = tmp_path / "schemas"
    exported.mkdir()
    for name, document in documents(catalog.ALL).items():
        (exported / name).write_text(dumps(document))
    ok = run_node("scripts/generate.mjs", "--check", "--schemas", str(exported))
    assert "follows the fleet's contracts" in ok

    # A field added to email:send in Python, the Zod schemas not regenerated.
    changed = json.loads((exported / "email.send.v1.schema.json").read_text())
    changed["properties"]["priority"] = {"type": "integer", "default": 0}
    (exported / "email.send.v1.schema.json").write_text(dumps(changed))
    done = subprocess.run(
        [node(), "scripts/generate.mjs", "--check", "--schemas", str(exported)],
        capture_output=True, text=True, timeout=60, cwd=KIT,
    )  # fmt: skip
    assert done.returncode == 1
    assert "out of date" in done.stderr and "npm run generate --prefix clients/node" in done.stderr


def _email(org: str) -> dict[str, Any]:
    return {
        "org_id": org,
        "entity_id": str(uuid.uuid4()),
        "template_key": "welcome",
        "recipient_email": f"u{uuid.uuid4().hex[:6]}@Example.COM",
        "variables": {"score": 0.1 + 0.2, "big": 1e21, "small": 1.5e-7, "n": 3},
    }


def test_node_and_python_sends_of_the_same_jobs_at_once_enqueue_each_job_once(
    runtime: Runtime, settings: Settings
) -> None:
    org = str(uuid.uuid4())
    cases = [{"job": "email:send", "payload": _email(org)} for _ in range(20)]
    cases += [
        {"job": "export:build", "payload": {"org_id": org, "entity_id": str(uuid.uuid4()),
                                            "requested_by": org, "type": "JOB_RUNS",
                                            "params": {"filters": {"ratio": 2.5}}}}
        for _ in range(10)
    ]  # fmt: skip
    python_results: list[Any] = []

    def python_sends() -> None:
        for case in cases:
            for _ in range(3):
                python_results.append(catalog.get(case["job"]).send(case["payload"]))

    threads = [threading.Thread(target=python_sends) for _ in range(2)]
    for thread in threads:
        thread.start()
    node_results = json.loads(
        run_node(
            "dist/example/send-many.js", settings.redis_url, settings.broker_namespace,
            str(settings.dedup_window_ms), "3", stdin=json.dumps(cases),
        )
    )  # fmt: skip
    for thread in threads:
        thread.join(60)

    ids = {r["jobId"] for r in node_results}
    assert ids == {r.job_id for r in python_results} and len(ids) == len(cases)
    enqueued = [r for r in node_results if not r["duplicate"]] + [
        r for r in python_results if not r.duplicate
    ]
    assert len(enqueued) == len(cases), "each job enqueued exactly once, by one side or the other"
    # Every duplicate names the one message that holds its id; Redis holds exactly that one.
    holder = {r["jobId"]: r["messageId"] for r in node_results if not r["duplicate"]}
    holder |= {r.job_id: r.message_id for r in python_results if not r.duplicate}
    assert all(holder[r["jobId"]] == r["messageId"] for r in node_results)
    ns = settings.broker_namespace
    for queue in ("email", "export"):
        bodies = [json.loads(m) for m in runtime.broker.client.hvals(f"{ns}:{queue}.msgs")]
        counted = [b["options"]["job_id"] for b in bodies if b["options"]["job_id"] in ids]
        assert len(counted) == len(set(counted))


def test_a_job_staged_in_a_rolled_back_transaction_never_reaches_the_fleet(
    runtime: Runtime, settings: Settings, db: Any
) -> None:
    org = str(uuid.uuid4())
    lost, kept = _email(org), _email(org)
    staged = json.loads(
        run_node(
            "dist/example/stage-demo.js", settings.database_url,
            stdin=json.dumps({"rolled_back": {"job": "email:send", "payload": lost},
                              "committed": {"job": "email:send", "payload": kept}}),
        )
    )  # fmt: skip
    rows = dict(db.execute("SELECT job_id, status FROM job_runs WHERE org_id = %s", (org,)))
    assert rows == {staged["committed"]: "STAGED"}
    assert db.execute(
        "SELECT count(*) FROM outbox_events WHERE job_id = %s", (staged["rolled_back"],)
    ).fetchone() == (0,)

    # What the scheduler's relay does every second.
    stats = outbox.relay_once(runtime, now=datetime.now(UTC))
    assert stats.published >= 1
    wait_for(
        lambda: (
            dict(db.execute("SELECT job_id, status FROM job_runs WHERE org_id = %s", (org,)))
            == {staged["committed"]: "QUEUED"}
        ),
        timeout=5,
        what="the committed job QUEUED, and nothing else",
    )
    ns = settings.broker_namespace
    carried = {
        json.loads(m)["options"]["job_id"] for m in runtime.broker.client.hvals(f"{ns}:email.msgs")
    }
    assert staged["committed"] in carried and staged["rolled_back"] not in carried
    assert not runtime.broker.client.exists(f"{ns}:jobfleet:job-id:{staged['rolled_back']}")


def test_the_node_block_of_the_producer_docs_runs(runtime: Runtime, tmp_path: Path) -> None:
    text = (ROOT / "docs" / "producers.md").read_text()
    section = text[text.index("## From Node.js") :]
    blocks = re.findall(r"^```js\n(.*?)^```", section, re.S | re.M)
    assert len(blocks) == 1
    # Resolved as a project that installed the kit: node_modules/@jobfleet/producer.
    (tmp_path / "node_modules" / "@jobfleet").mkdir(parents=True)
    (tmp_path / "node_modules" / "@jobfleet" / "producer").symlink_to(KIT)
    script = tmp_path / "producers.cjs"
    script.write_text(
        "(async () => {\n"
        + blocks[0]
        + "\n})().catch((e) => { console.error(e); process.exit(1); });\n"
    )
    out = run_node(
        str(script), env={**test_env(), "NODE_PATH": str(KIT / "node_modules")}
    ).splitlines()
    assert out == ["staged true", "sent false true true", "refused params.format"]


# -- the NestJS example API on real workers --------------------------------------------------


@pytest.fixture(scope="module")
def example_api(
    database: str, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("node-example")
    storage = {"STORAGE_LOCAL_ROOT": str(tmp / "storage"), "STORAGE_SIGNING_KEY": "k" * 32}
    base = {**os.environ, **test_env(), **storage, "dramatiq_worker_timeout": "50"}
    token = uuid.uuid4().hex
    keys = {"key-a": str(uuid.uuid4()), "key-b": str(uuid.uuid4())}
    status_port, api_port = free_port(), free_port()
    maildir = tmp / "mail"
    procs = [
        Proc(
            [sys.executable, "-m", "workers.email.sink", "--host", "127.0.0.1",
             "--port", base["SMTP_PORT"], "--maildir", str(maildir)],
            env=base, log_path=tmp / "smtp-sink.log",
        ),
        Proc(
            [sys.executable, "-m", "uvicorn", "shared.api.service:create_app", "--factory",
             "--host", "127.0.0.1", "--port", str(status_port), "--log-level", "warning"],
            env={**base, "JOB_API_TOKEN": token}, log_path=tmp / "job-status.log",
        ),
        Proc(
            [node(), str(DIST / "example" / "main.js")],
            env={**base, "PORT": str(api_port), "JOB_API_URL": f"http://127.0.0.1:{status_port}",
                 "JOB_API_TOKEN": token, "PRODUCT_API_KEYS": json.dumps(keys)},
            log_path=tmp / "example-api.log",
        ),
    ]  # fmt: skip
    for module in ("workers.export.app", "workers.email.app"):
        procs.append(
            Proc(
                [
                    sys.executable,
                    "-m",
                    "dramatiq",
                    module,
                    "--processes",
                    "1",
                    "--threads",
                    "2",
                    "--skip-logging",
                ],
                env=base,
                log_path=tmp / f"{module}.log",
            )
        )
    url = f"http://127.0.0.1:{api_port}"

    def up() -> bool:
        for proc in procs:
            if not proc.alive():
                raise AssertionError(f"{proc.popen.args} exited:\n{proc.log()[-3000:]}")
        try:
            return httpx.get(f"{url}/jobs/x", timeout=2).status_code == 401
        except httpx.TransportError:
            return False

    try:
        with relaying(settings):
            wait_for(up, timeout=60, interval=0.2, what="the example API answering")
            yield url, keys
    finally:
        for proc in procs:
            proc.close()


def _until(client: httpx.Client, job_id: str, status: str, timeout: float = 60) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def reached() -> bool:
        answer = client.get(f"/jobs/{job_id}")
        seen.update(answer.json())
        return answer.status_code == 200 and seen.get("status") == status

    wait_for(reached, timeout=timeout, interval=0.2, what=f"{job_id} {status} (last: {seen})")
    return seen


def test_the_example_apis_jobs_run_to_completed_on_real_workers(
    example_api: tuple[str, dict[str, str]],
) -> None:
    url, _ = example_api
    a = httpx.Client(base_url=url, headers={"authorization": "Bearer key-a"}, timeout=10)
    b = httpx.Client(base_url=url, headers={"authorization": "Bearer key-b"}, timeout=10)

    export = a.post("/exports", json={"type": "JOB_RUNS", "params": {"format": "CSV"}})
    assert export.status_code == 202, export.text
    email = a.post(
        "/emails",
        json={"template_key": "welcome", "recipient_email": "ana@example.com",
              "variables": {"NAME": "Ana"}},
    )  # fmt: skip
    assert email.status_code == 202, email.text
    done = _until(a, export.json()["job_id"], "COMPLETED")
    assert done["job_name"] == "export:build"
    sent = _until(a, email.json()["job_id"], "COMPLETED")
    assert sent["job_name"] == "email:send"

    # Scoped by org: the other key's org does not see it (the fleet's 404, passed through).
    assert b.get(f"/jobs/{export.json()['job_id']}").status_code == 404
    # Refused before anything is written: the kit's InvalidPayload, with the field's path.
    bad = a.post("/exports", json={"type": "JOB_RUNS", "params": {"format": "DOCX"}})
    assert bad.status_code == 422
    assert [i["path"] for i in bad.json()["issues"]] == ["params.format"]
    # Staged and visible at once, whatever worker runs it later.
    task = a.post("/ai-tasks", json={"task": "summarize", "input": "Some text."})
    assert task.status_code == 202
    answer = a.get(f"/jobs/{task.json()['job_id']}")
    # (No AI worker in this fleet: the job waits in its queue.)
    assert answer.status_code == 200 and answer.json()["status"] in ("STAGED", "QUEUED")
