"""Wallet keys sealed at rest: AES-256-GCM under a KEK with a key id, rotation, wrong KEK."""

from __future__ import annotations

from typing import Any

import pytest

from shared.chain.abi import LOTTERY
from shared.chain.errors import WalletKeyUnreadable
from shared.chain.wallets import EMBEDDED, count_by_kek, load_signer, rotate_kek, store_wallet
from shared.jobs.ids import chain_job_id
from workers.chain_actions.client import MINT_BADGE
from workers.chain_actions.domain import Action, perform

from .world import KEK_A, KEK_B, World, keyring, project_ticket

KEY = bytes.fromhex("11" * 32)
ADDRESS = "0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A"  # the address of KEY


def test_a_sealed_key_opens_only_with_its_kek_and_its_own_address() -> None:
    ring = keyring()
    sealed = ring.seal(KEY, ADDRESS)
    assert KEY not in sealed.ciphertext and sealed.kek_id == "a"
    assert ring.open(sealed, ADDRESS) == KEY
    with pytest.raises(WalletKeyUnreadable):
        ring.open(sealed, "0x" + "22" * 20)  # a ciphertext copied onto another wallet
    with pytest.raises(WalletKeyUnreadable, match="does not decrypt with KEK 'a'"):
        keyring(keks={"a": KEK_B}).open(sealed, ADDRESS)
    with pytest.raises(WalletKeyUnreadable, match="not in CHAIN_KEKS"):
        keyring("b", keks={"b": KEK_B}).open(sealed, ADDRESS)
    assert "11" * 8 not in repr(sealed) + repr(ring)


def test_rotating_the_kek_reseals_every_key_and_the_old_kek_can_then_go(
    world: World, db: Any
) -> None:
    store_wallet(db, keyring(), KEY, kind=EMBEDDED)
    assert count_by_kek(db) == {"a": 8, None: 1}
    both = keyring("b", keks={"a": KEK_A, "b": KEK_B})
    assert rotate_kek(db, both) == 8
    assert count_by_kek(db) == {"b": 8, None: 1}
    only_new = keyring("b", keks={"b": KEK_B})
    signer = load_signer(db, only_new, ADDRESS)
    assert signer is not None and signer.address == ADDRESS
    assert rotate_kek(db, only_new) == 0


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
