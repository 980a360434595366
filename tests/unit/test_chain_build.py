"""The contracts build offline and reproducibly; producers load ABIs without node or web3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from chain.abi import ARTIFACTS, LOTTERY, error_registry, event_topic

ROOT = Path(__file__).resolve().parents[2]


def test_rebuilding_the_contracts_gives_byte_identical_artifacts(tmp_path: Path) -> None:
    subprocess.run(
        ["node", "contracts/build.mjs", "--out", str(tmp_path)], cwd=ROOT, check=True, timeout=120
    )
    committed = sorted(p.name for p in ARTIFACTS.glob("*.json"))
    assert (
        committed
        == sorted(p.name for p in tmp_path.glob("*.json"))
        == [
            "BlockLucky.json",
            "BlockLuckyPOAP.json",
            "VRFCoordinatorLocal.json",
        ]
    )
    for name in committed:
        assert (tmp_path / name).read_bytes() == (ARTIFACTS / name).read_bytes(), f"{name} is stale"


def test_the_artifacts_come_from_the_pinned_compiler() -> None:
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["solc"]
    for path in ARTIFACTS.glob("*.json"):
        assert json.loads(path.read_text())["compiler"]["version"].startswith(pinned + "+commit.")


def test_every_error_the_worker_maps_is_in_the_abis() -> None:
    from workers.chain_actions.domain import ALREADY_DONE, DEFINITIVE

    assert {e.name for e in error_registry().values()} >= ALREADY_DONE | DEFINITIVE


def test_importing_the_kernel_and_chain_helpers_does_not_import_web3() -> None:
    code = (
        "import sys, shared.jobs.catalog, chain.abi, chain.transactions, chain.cli,"
        " scheduler.chain.cli, workers.chain_actions.client;"
        "loaded = [m for m in ('web3', 'eth_account', 'eth_abi') if m in sys.modules];"
        "sys.exit(f'imported at import time: {loaded}' if loaded else 0)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_event_topics_are_the_keccak_of_the_issue_signatures() -> None:
    from eth_utils.crypto import keccak

    for event, sig in (
        ("TicketsPurchased", "TicketsPurchased(uint256,address,uint256,uint256)"),
        ("WinnerPicked", "WinnerPicked(uint256,address,uint256)"),
        ("RoundCancelled", "RoundCancelled(uint256)"),
    ):
        assert event_topic(LOTTERY, event) == "0x" + keccak(text=sig).hex()
