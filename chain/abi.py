"""The reference contracts' artifacts (ABI, bytecode) and decoding of revert data by selector.

Artifacts are JSON files under `artifacts/` written by `node contracts/build.mjs`; loading them
needs neither node nor web3. Decoding the arguments of a custom error imports `eth_abi` lazily
(the `chain` extra).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from .keccak import keccak256

ARTIFACTS = Path(__file__).with_name("artifacts")

LOTTERY = "BlockLucky"
BADGE = "BlockLuckyPOAP"
COORDINATOR = "VRFCoordinatorLocal"

#: Solidity's built-in revert encodings.
ERROR_STRING = bytes.fromhex("08c379a0")  # Error(string)
PANIC = bytes.fromhex("4e487b71")  # Panic(uint256)


@dataclass(frozen=True)
class Artifact:
    name: str
    abi: list[dict[str, Any]]
    bytecode: str
    sha256: str


@cache
def load_artifact(name: str) -> Artifact:
    path = ARTIFACTS / f"{name}.json"
    raw = path.read_bytes()
    data = json.loads(raw)
    return Artifact(
        name=name,
        abi=data["abi"],
        bytecode=data["bytecode"],
        sha256=hashlib.sha256(raw).hexdigest(),
    )


def signature(item: dict[str, Any]) -> str:
    return f"{item['name']}({','.join(_canonical_type(i) for i in item.get('inputs', []))})"


def _canonical_type(param: dict[str, Any]) -> str:
    kind = str(param["type"])
    if kind.startswith("tuple"):
        return "(" + ",".join(_canonical_type(c) for c in param["components"]) + ")" + kind[5:]
    return kind


@dataclass(frozen=True)
class ErrorDef:
    name: str
    selector: bytes
    types: tuple[str, ...]
    arg_names: tuple[str, ...]


@cache
def error_registry() -> dict[bytes, ErrorDef]:
    """Every custom error of every artifact, by 4-byte selector."""
    registry: dict[bytes, ErrorDef] = {}
    for path in sorted(ARTIFACTS.glob("*.json")):
        for item in load_artifact(path.stem).abi:
            if item.get("type") != "error":
                continue
            sig = signature(item)
            selector = keccak256(sig.encode())[:4]
            registry[selector] = ErrorDef(
                name=item["name"],
                selector=selector,
                types=tuple(_canonical_type(i) for i in item.get("inputs", [])),
                arg_names=tuple(i.get("name", "") for i in item.get("inputs", [])),
            )
    return registry


@dataclass(frozen=True)
class Revert:
    """A decoded revert: the custom error's name (or `Error` / `Panic` / `UNKNOWN_REVERT`)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    data: bytes = b""

    def describe(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in self.args.items())})"


def decode_revert(data: bytes) -> Revert:
    """Name (and arguments) of a revert from its raw data; unknown selectors keep the hex."""
    selector, body = data[:4], data[4:]
    if not data:
        return Revert("UNKNOWN_REVERT", data=data)
    if selector == ERROR_STRING:
        return Revert("Error", {"message": _decode(("string",), body, default=[""])[0]}, data)
    if selector == PANIC:
        return Revert("Panic", {"code": _decode(("uint256",), body, default=[0])[0]}, data)
    err = error_registry().get(selector)
    if err is None:
        return Revert("UNKNOWN_REVERT", {"selector": "0x" + selector.hex()}, data)
    values = _decode(err.types, body, default=None)
    args = (
        {}
        if values is None
        else {
            n or f"arg{i}": _plain(v)
            for i, (n, v) in enumerate(zip(err.arg_names, values, strict=True))
        }
    )
    return Revert(err.name, args, data)


def _decode(types: tuple[str, ...], body: bytes, *, default: Any) -> Any:
    from eth_abi.abi import decode
    from eth_abi.exceptions import DecodingError

    try:
        return list(decode(list(types), body))
    except (DecodingError, ValueError, OverflowError):
        return default


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return value


# -- calldata --


def _function(name: str, fn: str) -> dict[str, Any]:
    for item in load_artifact(name).abi:
        if item.get("type") == "function" and item["name"] == fn:
            return item
    raise KeyError(f"{name} has no function {fn!r}")


def encode_call(name: str, fn: str, *args: Any) -> bytes:
    """Calldata of `name.fn(*args)` (selector + ABI-encoded arguments)."""
    from eth_abi.abi import encode

    item = _function(name, fn)
    selector = keccak256(signature(item).encode())[:4]
    return selector + encode([_canonical_type(i) for i in item.get("inputs", [])], list(args))


def decode_result(name: str, fn: str, data: bytes) -> tuple[Any, ...]:
    from eth_abi.abi import decode

    item = _function(name, fn)
    return tuple(decode([_canonical_type(o) for o in item.get("outputs", [])], data))


def deploy_data(name: str, *args: Any) -> bytes:
    """Creation code of `name` with its constructor arguments appended."""
    from eth_abi.abi import encode

    artifact = load_artifact(name)
    ctor: dict[str, Any] = next(
        (i for i in artifact.abi if i.get("type") == "constructor"), {"inputs": []}
    )
    return bytes.fromhex(artifact.bytecode[2:]) + encode(
        [_canonical_type(i) for i in ctor["inputs"]], list(args)
    )


def event_topic(name: str, event: str) -> str:
    """`topic0` of `name`'s event (hex), for `eth_getLogs` filters (the indexer)."""
    for item in load_artifact(name).abi:
        if item.get("type") == "event" and item["name"] == event:
            return "0x" + keccak256(signature(item).encode()).hex()
    raise KeyError(f"{name} has no event {event!r}")
