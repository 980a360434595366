"""EIP-55 checksum addresses without pulling in web3 (producers stay light)."""

from __future__ import annotations

from .keccak import keccak256


def to_checksum_address(address: str) -> str:
    lower = address.lower().removeprefix("0x")
    digest = keccak256(lower.encode("ascii")).hex()
    return "0x" + "".join(c.upper() if int(digest[i], 16) >= 8 else c for i, c in enumerate(lower))
