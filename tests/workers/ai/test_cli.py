"""`fleet ai usage --org ORG --since D` (and `fleet ai run`) through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.env import test_env
from tests.support.wait import wait_for
from workers.ai.cli import parse_since

FLEET = Path(sys.executable).with_name("fleet")


def fleet(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **test_env(), "COLUMNS": "200"}
    return subprocess.run(
        [str(FLEET), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _usage(
    db, org: uuid.UUID, day: date, model: str, requests: int, tin: int, tout: int, cost: str
) -> None:  # type: ignore[no-untyped-def]
    db.execute(
        "INSERT INTO ai_usage (org_id, model, day, requests, tokens_in, tokens_out, cost) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (org, model, day, requests, tin, tout, Decimal(cost)),
    )


@pytest.mark.slow
def test_usage_lists_days_and_models_of_one_org_since_a_date_with_totals(runtime, db) -> None:
    org, other = uuid.uuid4(), uuid.uuid4()
    today = datetime.now(UTC).date()
    _usage(db, org, today - timedelta(days=40), "gpt-4o-mini", 9, 900, 90, "1.0")  # before --since
    _usage(db, org, today - timedelta(days=2), "gpt-4o-mini", 3, 1200, 300, "0.00036")
    _usage(db, org, today - timedelta(days=2), "all-MiniLM-L6-v2", 5, 700, 0, "0")
    _usage(db, org, today, "gpt-4o-mini", 1, 100, 20, "0.000027")
    _usage(db, other, today, "gpt-4o-mini", 7, 7000, 700, "0.5")  # another org

    since = (today - timedelta(days=7)).isoformat()
    done = fleet("ai", "usage", "--org", str(org), "--since", since, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    assert [(r["day"], r["model"], r["requests"]) for r in report["rows"]] == [
        ((today - timedelta(days=2)).isoformat(), "all-MiniLM-L6-v2", 5),
        ((today - timedelta(days=2)).isoformat(), "gpt-4o-mini", 3),
        (today.isoformat(), "gpt-4o-mini", 1),
    ]
    assert report["total"] == {
        "requests": 9,
        "tokens_in": 2000,
        "tokens_out": 320,
        "cost": "0.00038700",
    }

    table = fleet("ai", "usage", "--org", str(org), "--since", "7d")
    assert table.returncode == 0, table.stderr
    assert "total" in table.stdout and "0.000387" in table.stdout and "7000" not in table.stdout


def test_since_takes_a_date_or_a_duration_back_from_today() -> None:
    today = date(2026, 11, 29)
    assert parse_since("2026-11-01", today) == date(2026, 11, 1)
    assert parse_since("7d", today) == date(2026, 11, 22)
    assert parse_since("2w", today) == date(2026, 11, 15)
    with pytest.raises(Exception, match="neither a date"):
        parse_since("last week", today)


@pytest.mark.slow
def test_run_creates_the_task_job_and_show_tells_its_state(runtime, db) -> None:
    org = uuid.uuid4()
    done = fleet(
        "ai",
        "run",
        "classify",
        "Facture n° 12",
        "--org",
        str(org),
        "--params",
        '{"labels": ["a", "b"]}',
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    job = wait_for(
        lambda: db.execute(
            "SELECT status, payload FROM job_runs WHERE job_id = %s", (lines["job"],)
        ).fetchone(),
        what="the QUEUED run",
    )
    assert (
        job[0] == "QUEUED"
        and job[1]["entity_id"] == lines["task"]
        and job[1]["input"] == "Facture n° 12"
    )
    missing = fleet("ai", "show", lines["task"], "--org", str(org))
    assert missing.returncode == 1 and "no AI task" in missing.stderr  # the worker creates the row
