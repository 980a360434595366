"""Wallet key encryption at rest: AES-256-GCM under a key-encryption key (KEK) from settings.

A stored key is `nonce (12 bytes) || ciphertext || tag (16 bytes)` with the wallet's lower-case
address as associated data (a ciphertext copied onto another wallet row does not decrypt), plus
the id of the KEK that sealed it, so KEKs can be rotated: add the new KEK to `CHAIN_KEKS`, point
`CHAIN_KEK_ID` at it, run `fleet wallets rotate-kek`, then drop the old one.

Plain keys live only in local variables of the signing code: never logged, never in payloads,
never in job rows (`__repr__` of the types below hides them).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass

from Crypto.Cipher import AES
from Crypto.Random import get_random_bytes
from pydantic import SecretStr

from .errors import KekNotConfigured, WalletKeyUnreadable

NONCE_BYTES = 12
TAG_BYTES = 16
KEY_BYTES = 32


@dataclass(frozen=True)
class SealedKey:
    ciphertext: bytes
    kek_id: str

    def __repr__(self) -> str:
        return f"SealedKey(kek_id={self.kek_id!r}, {len(self.ciphertext)} bytes)"


class Keyring:
    """The KEKs a process knows, by id, and the id that seals new keys."""

    def __init__(self, keks: Mapping[str, bytes], current_id: str | None) -> None:
        for kid, kek in keks.items():
            if len(kek) != KEY_BYTES:
                raise KekNotConfigured(f"KEK {kid!r} must be {KEY_BYTES} bytes, got {len(kek)}")
        if current_id is not None and current_id not in keks:
            raise KekNotConfigured(f"CHAIN_KEK_ID {current_id!r} is not a key of CHAIN_KEKS")
        self._keks = dict(keks)
        self.current_id = current_id

    @classmethod
    def from_settings(cls, keks: Mapping[str, SecretStr], current_id: str | None) -> Keyring:
        decoded: dict[str, bytes] = {}
        for kid, secret in keks.items():
            try:
                decoded[kid] = base64.b64decode(secret.get_secret_value(), validate=True)
            except (binascii.Error, ValueError):
                raise KekNotConfigured(f"KEK {kid!r} in CHAIN_KEKS is not valid base64") from None
        if current_id is None and len(decoded) == 1:
            current_id = next(iter(decoded))
        return cls(decoded, current_id)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._keks)

    def __repr__(self) -> str:
        return f"Keyring(ids={list(self._keks)}, current={self.current_id!r})"

    def seal(self, private_key: bytes, address: str) -> SealedKey:
        if self.current_id is None:
            raise KekNotConfigured()
        nonce = get_random_bytes(NONCE_BYTES)
        cipher = AES.new(self._keks[self.current_id], AES.MODE_GCM, nonce=nonce, mac_len=TAG_BYTES)
        cipher.update(_aad(address))
        ciphertext, tag = cipher.encrypt_and_digest(private_key)
        return SealedKey(nonce + ciphertext + tag, self.current_id)

    def open(self, sealed: SealedKey, address: str) -> bytes:
        kek = self._keks.get(sealed.kek_id)
        if kek is None:
            raise WalletKeyUnreadable(
                f"key of wallet {address} is sealed with KEK {sealed.kek_id!r},"
                f" which is not in CHAIN_KEKS (known: {', '.join(self._keks) or 'none'})"
            )
        data = sealed.ciphertext
        nonce, body, tag = data[:NONCE_BYTES], data[NONCE_BYTES:-TAG_BYTES], data[-TAG_BYTES:]
        cipher = AES.new(kek, AES.MODE_GCM, nonce=nonce, mac_len=TAG_BYTES)
        cipher.update(_aad(address))
        try:
            return cipher.decrypt_and_verify(body, tag)
        except ValueError:
            raise WalletKeyUnreadable(
                f"key of wallet {address} does not decrypt with KEK {sealed.kek_id!r}:"
                " wrong key-encryption key, or the stored ciphertext was altered"
            ) from None

    def reseal(self, sealed: SealedKey, address: str) -> SealedKey:
        """The same key sealed under the current KEK (rotation)."""
        return self.seal(self.open(sealed, address), address)


def new_kek() -> str:
    """A fresh KEK, base64 (for `CHAIN_KEKS`)."""
    return base64.b64encode(get_random_bytes(KEY_BYTES)).decode("ascii")


def _aad(address: str) -> bytes:
    return address.lower().encode("ascii")
