"""The chain actions' producer API (`workers.chain_actions.client`): an action's job id is its
scoped intent, staging writes it in the caller's transaction only, and importing the client
boots nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.errors import PayloadError
from shared.runtime import Runtime
from workers.chain_actions import client

ROOT = Path(__file__).resolve().parents[3]
LOTTERY = "0x" + "ab" * 20
PLAYER = "0x" + "cd" * 20


def test_an_actions_job_id_is_its_scoped_intent() -> None:
    badge = client.mint_badge(chain_id=31337, contract=LOTTERY, round_id=3, player=PLAYER)
    assert badge.job_name == "chain:mint_badge"
    assert badge.job_id == f"MINT_BADGE-31337-{LOTTERY.lower()}-3-{PLAYER.lower()}"
    again = client.action(
        client.MINT_BADGE, chain_id=31337, contract=LOTTERY, round_id=3, address=PLAYER
    )
    assert again.job_id == badge.job_id  # asking twice is one job
    prize = client.claim_prize(chain_id=31337, contract=LOTTERY, round_id=3, winner=PLAYER)
    refund = client.claim_refund(chain_id=31337, contract=LOTTERY, round_id=3, payer=PLAYER)
    assert (prize.job_name, refund.job_name) == ("chain:claim_prize", "chain:claim_refund")
    assert len({badge.job_id, prize.job_id, refund.job_id}) == 3


def test_an_invalid_action_is_refused_before_anything_is_written() -> None:
    with pytest.raises(PayloadError):
        client.mint_badge(chain_id=31337, contract=LOTTERY, round_id=-1, player=PLAYER)
    with pytest.raises(ValueError, match="unknown chain action"):
        client.action("BURN", chain_id=1, contract=LOTTERY, round_id=1, address=PLAYER)


def test_a_staged_action_exists_only_once_the_callers_transaction_commits(
    runtime: Runtime, db: Any
) -> None:
    badge = client.mint_badge(chain_id=31337, contract=LOTTERY, round_id=7, player=PLAYER)
    with pytest.raises(RuntimeError), runtime.sessions() as session, session.begin():
        client.stage(session, badge, event_type="test")
        raise RuntimeError("the caller's request failed after staging")
    assert db.execute("SELECT count(*) FROM outbox_events").fetchone() == (0,)

    with runtime.sessions() as session, session.begin():
        event_id = client.stage(session, badge, event_type="test")
    row = db.execute(
        "SELECT job_name, job_id, type, status FROM outbox_events WHERE id = %s", (event_id,)
    ).fetchone()
    assert row == ("chain:mint_badge", badge.job_id, "test", "PENDING")


def test_importing_the_client_boots_nothing_and_loads_no_web3() -> None:
    code = (
        "import logging, sys, workers.chain_actions.client;"
        "from shared.runtime import installed_runtime;"
        "heavy = [m for m in ('web3', 'eth_account', 'eth_abi') if m in sys.modules];"
        "booted = [m for m in ('workers.chain_actions.app', 'shared.bootstrap') if m in sys.modules];"
        "assert not heavy and not booted, (heavy, booted);"
        "assert installed_runtime() is None and not logging.getLogger().handlers"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
