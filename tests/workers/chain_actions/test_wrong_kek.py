"""A wrong KEK in the chain-actions worker: a clear permanent error, journaled, nothing sent
(the keyring itself: tests/integration/chain/test_keys.py)."""

from __future__ import annotations

from typing import Any

import pytest

from chain.abi import LOTTERY
from chain.errors import WalletKeyUnreadable
from tests.support.chain.world import KEK_B, World, keyring, project_ticket
from workers.chain_actions.client import MINT_BADGE
from workers.chain_actions.domain import Action, perform
from workers.chain_actions.job_ids import chain_job_id


def test_a_wrong_kek_is_a_clear_permanent_error(world: World, deps: Any, db: Any) -> None:
    deps.keyring = keyring(keks={"a": KEK_B})  # same key id, another key: a wrong KEK
    player = world.accounts[2].address
    lottery = world.contracts[LOTTERY]
    job_id = chain_job_id(MINT_BADGE, deps.chain_id, lottery, 1, player)
    job = Action(MINT_BADGE, job_id, 1, player, deps.chain_id, lottery)
    project_ticket(db, deps.chain_id, lottery, 1, player)
    with pytest.raises(WalletKeyUnreadable) as failure:
        perform(job, deps)
    assert failure.value.code == "WALLET_KEY_UNREADABLE"
    assert "wrong key-encryption key" in str(failure.value) and "KEK 'a'" in str(failure.value)
    row = db.execute(
        "SELECT status, error_code FROM chain_actions WHERE job_id = %s", (job.job_id,)
    ).fetchone()
    assert row == ("FAILED", "WALLET_KEY_UNREADABLE")
    assert not world.has_badge(player, 1)
