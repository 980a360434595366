"""The `wallets` table: embedded (custodial) player wallets, the operator wallet and the
operator's pool of signers (SIGNER), with keys sealed by `keys.Keyring`. Functions take a
psycopg connection; the caller owns the transaction.

`load_signer` returns a `Signer` (address + an eth-account signer) or None when the wallet is
unknown or has no stored key, the "nothing to sign with" case of the chain actions.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from shared.contracts.base import SYSTEM_ORG

from .address import to_checksum_address
from .errors import KekNotConfigured
from .keys import Keyring, SealedKey

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

EMBEDDED = "EMBEDDED"
OPERATOR = "OPERATOR"
#: One more operator signer of the chain actions (the pool: the OPERATOR and every SIGNER).
SIGNER = "SIGNER"


@dataclass(frozen=True)
class WalletInfo:
    address: str
    kind: str
    has_key: bool
    kek_id: str | None
    org_id: UUID


def account_from_key(private_key: bytes) -> LocalAccount:
    from eth_account import Account

    account: LocalAccount = Account.from_key(private_key)
    return account


def store_wallet(
    conn: Any,
    keyring: Keyring,
    private_key: bytes | None,
    *,
    address: str | None = None,
    kind: str = EMBEDDED,
    org_id: UUID = SYSTEM_ORG,
    owner_ref: str | None = None,
) -> str:
    """Insert or update a wallet (its key sealed under the current KEK); returns the address.

    The address is derived from the key when one is given; a keyless wallet needs `address`.
    """
    if private_key is not None:
        derived = account_from_key(private_key).address
        if address is not None and address.lower() != derived.lower():
            raise ValueError("address does not match the private key")
        address = derived
    if address is None:
        raise ValueError("a wallet needs a private key or an address")
    address = to_checksum_address(address)
    sealed = keyring.seal(private_key, address) if private_key is not None else None
    conn.execute(
        """
        INSERT INTO wallets (org_id, address, kind, owner_ref, key_ciphertext, kek_id)
        VALUES (%s, %s, %s, %s, %s, %s)
        ON CONFLICT (address) DO UPDATE SET kind = EXCLUDED.kind, owner_ref = EXCLUDED.owner_ref,
            key_ciphertext = EXCLUDED.key_ciphertext, kek_id = EXCLUDED.kek_id, rotated_at = now()
        """,
        (
            org_id,
            address,
            kind,
            owner_ref,
            sealed.ciphertext if sealed else None,
            sealed.kek_id if sealed else None,
        ),
    )
    return address


def operator_address(conn: Any) -> str | None:
    row = conn.execute("SELECT address FROM wallets WHERE kind = 'OPERATOR'").fetchone()
    return str(row[0]) if row else None


def wallet_info(conn: Any, address: str) -> WalletInfo | None:
    row = conn.execute(
        "SELECT address, kind, key_ciphertext IS NOT NULL, kek_id, org_id FROM wallets"
        " WHERE address = %s",
        (to_checksum_address(address),),
    ).fetchone()
    return WalletInfo(*row) if row else None


def load_signer(conn: Any, keyring: Keyring, address: str) -> LocalAccount | None:
    """The wallet's signer, or None when the wallet is unknown or keyless.

    Raises `WalletKeyUnreadable` (permanent) when the key exists but does not decrypt.
    """
    address = to_checksum_address(address)
    row = conn.execute(
        "SELECT key_ciphertext, kek_id FROM wallets WHERE address = %s", (address,)
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return account_from_key(keyring.open(SealedKey(bytes(row[0]), row[1]), address))


def load_operator(conn: Any, keyring: Keyring) -> LocalAccount | None:
    address = operator_address(conn)
    return load_signer(conn, keyring, address) if address else None


def signer_pool(conn: Any) -> list[str]:
    """The operator signers with a stored key: the OPERATOR first, then every SIGNER by
    address (a stable order: an action's signer is chosen by its position)."""
    rows = conn.execute(
        "SELECT address FROM wallets WHERE kind IN ('OPERATOR', 'SIGNER')"
        " AND key_ciphertext IS NOT NULL ORDER BY kind = 'SIGNER', lower(address)"
    ).fetchall()
    return [str(r[0]) for r in rows]


def pool_signer(conn: Any, keyring: Keyring, key: str, pinned: str | None) -> LocalAccount | None:
    """The operator signer of the action `key`: `pinned` (the signer its journal row already
    broadcast from: an action never goes out from two signers) when it still has a key, else
    the pool's member at `sha256(key) mod size` (every action of the pool's size spread over
    its lanes, the same one on every delivery). None without any operator key."""
    if pinned:
        signer = load_signer(conn, keyring, pinned)
        if signer is not None:
            return signer
    pool = signer_pool(conn)
    if not pool:
        return None
    index = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % len(pool)
    return load_signer(conn, keyring, pool[index])


def rotate_kek(conn: Any, keyring: Keyring, *, batch: int = 500) -> int:
    """Re-seal every key not under the current KEK; returns how many were re-sealed.

    Each wallet is updated only if its ciphertext is still the one that was read, so two
    rotations running at once do not overwrite each other's work.
    """
    if keyring.current_id is None:
        raise KekNotConfigured("set CHAIN_KEK_ID to the KEK that rotated keys are sealed with")
    done = 0
    while True:
        rows = conn.execute(
            "SELECT address, key_ciphertext, kek_id FROM wallets"
            " WHERE key_ciphertext IS NOT NULL AND kek_id <> %s ORDER BY address LIMIT %s FOR UPDATE SKIP LOCKED",
            (keyring.current_id, batch),
        ).fetchall()
        if not rows:
            return done
        for address, ciphertext, kek_id in rows:
            resealed = keyring.reseal(SealedKey(bytes(ciphertext), kek_id), address)
            conn.execute(
                "UPDATE wallets SET key_ciphertext = %s, kek_id = %s, rotated_at = now()"
                " WHERE address = %s",
                (resealed.ciphertext, resealed.kek_id, address),
            )
            done += 1


def count_by_kek(conn: Any) -> dict[str | None, int]:
    rows = conn.execute(
        "SELECT kek_id, count(*) FROM wallets GROUP BY kek_id ORDER BY kek_id"
    ).fetchall()
    return {kid: int(n) for kid, n in rows}
