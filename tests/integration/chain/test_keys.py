"""Wallet keys sealed at rest: AES-256-GCM under a KEK with a key id, rotation, wrong KEK (what
the chain-actions worker does with a wrong KEK: tests/workers/chain_actions/test_wrong_kek.py)."""

from __future__ import annotations

from typing import Any

import pytest

from chain.errors import WalletKeyUnreadable
from chain.wallets import EMBEDDED, count_by_kek, load_signer, rotate_kek, store_wallet
from tests.support.chain.world import KEK_A, KEK_B, World, keyring

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
