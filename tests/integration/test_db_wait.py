"""`fleet db wait` (the init container of each worker and of the scheduler, compose/k8s) on a real
Postgres: it waits while a migration head is missing, exits 0 once every head is applied, and
gives up after its timeout with what was missing."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from alembic import command

from shared.config import Settings
from shared.db.migrate import alembic_config, upgrade
from shared.db.schema import script_heads
from tests.support.procs import Proc, free_port, wait_exit
from tests.support.scratch_db import scratch_database
from tests.support.wait import wait_for

FLEET = str(Path(sys.executable).with_name("fleet"))


def wait_command(tmp: Path, url: str, *args: str, name: str = "wait") -> Proc:
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": url, "FLEET_LOG_LEVEL": "WARNING"}
    return Proc([FLEET, "db", "wait", *args], env=env, log_path=tmp / f"{name}.log")


def test_it_waits_while_heads_are_missing_and_exits_0_once_every_head_is_applied(
    settings: Settings, tmp_path: Path
) -> None:
    with scratch_database(settings, "dbwait") as db:
        proc = wait_command(tmp_path, db.url, "--timeout", "120", "--interval", "0.2")
        try:
            wait_for(lambda: "waiting for the schema" in proc.log(), timeout=30, what="waiting")
            # Only the kernel's first revision: every domain's head is still missing.
            command.upgrade(alembic_config(db.url), "0001")
            time.sleep(1.5)
            assert proc.alive(), proc.log()
            assert "missing:" in proc.log()

            upgrade(db.url, "heads")
            code, _ = wait_exit(proc, 30)
        finally:
            proc.close()
    assert code == 0, proc.log()
    assert "is migrated" in proc.log()


def test_it_gives_up_after_its_timeout_naming_the_missing_heads(
    settings: Settings, tmp_path: Path
) -> None:
    with scratch_database(settings, "dbwait") as db:
        proc = wait_command(tmp_path, db.url, "--timeout", "1", "--interval", "0.2")
        try:
            code, waited = wait_exit(proc, 30)
        finally:
            proc.close()
    assert code == 1, proc.log()
    assert waited < 15
    log = proc.log()
    assert "database not migrated after 1 s" in log and "migration Job" in log
    assert all(head in log for head in script_heads())
    assert "Traceback" not in log


def test_an_unreachable_database_is_waited_for_then_reported(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/jobfleet"
    proc = wait_command(tmp_path, url, "--timeout", "1", "--interval", "0.2")
    try:
        code, _ = wait_exit(proc, 30)
    finally:
        proc.close()
    assert code == 1
    assert "database unreachable" in proc.log() and "Traceback" not in proc.log()
