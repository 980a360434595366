"""Keccak-256 (the Ethereum hash, not NIST SHA3-256)."""

from __future__ import annotations

from Crypto.Hash import keccak


def keccak256(data: bytes) -> bytes:
    return keccak.new(data=data, digest_bits=256).digest()
