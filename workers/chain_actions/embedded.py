"""The EVM node for `make run` (the domain's `Domain.services` hook, `start`): `CHAIN_RPC_URL`
when it answers, else anvil (npm `@foundry-rs/anvil`) with the reference contracts deployed.

An embedded anvil keeps its chain in `var/chain/anvil-state.json` (`--state`), so a restart
finds its blocks, contracts and rounds where they were, as Postgres keeps what was derived from
them. The contracts are deployed when the node has none yet (`fleet chain deploy --dev
--if-missing`: anvil's first dev account becomes the operator wallet, sealed under the dev
key-encryption key). Without that file (deleted, or anvil killed before its first save) the
chain starts again from a new genesis, and the scheduler resets what it had derived from the
old one (`chain.genesis_changed` in its log). That KEK is created once under `var/chain/` (mode 0600) unless
`CHAIN_KEKS` is set; it is for the local fleet only — production passes its own through the
environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from shared.launcher import LaunchError
from shared.launcher.embedded import Service


def start(var: Path, env: dict[str, str], say: Callable[[str], None]) -> Service:
    """Resolve the node (configured or embedded), give the fleet's processes what they need to
    use it (`CHAIN_RPC_URL`, and the dev KEK when `CHAIN_KEKS` is not set) in `env`, and deploy
    the reference contracts on an embedded one. The launcher stops the service at exit."""
    from chain.settings import chain_settings

    configured = env.get("CHAIN_RPC_URL") or chain_settings().rpc_url
    env.update(dev_keys(var, env))
    node = resolve(configured, var, env=env)
    env["CHAIN_RPC_URL"] = node.url
    if node.embedded:
        try:
            say(f"reference contracts deployed: {deploy(env, var / 'log' / 'deploy.log')}")
        except BaseException:
            node.stop()
            raise
    return node


def answers(url: str) -> bool:
    try:
        from chain.client import ChainClient

        ChainClient.connect(url, timeout_s=1).chain_id()
        return True
    except Exception:
        return False


def dev_keys(var_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """CHAIN_KEKS / CHAIN_KEK_ID for the children: the environment's, else the dev ones."""
    if env.get("CHAIN_KEKS"):
        return {}
    path = var_dir / "chain" / "kek.json"
    if not path.exists():
        from chain.keys import new_kek

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"id": "dev-1", "key": new_kek()}, f)
    kek = json.loads(path.read_text())
    return {"CHAIN_KEKS": json.dumps({kek["id"]: kek["key"]}), "CHAIN_KEK_ID": kek["id"]}


def resolve(url: str, var_dir: Path, *, env: dict[str, str]) -> Service:
    if answers(url):
        detail = "from CHAIN_RPC_URL" if "CHAIN_RPC_URL" in env else "the CHAIN_RPC_URL default"
        return Service(
            "EVM node",
            url,
            embedded=False,
            detail=f"{detail}; deploy with `fleet chain deploy`",
            variables=("CHAIN_RPC_URL",),
        )
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost"):
        raise LaunchError(f"EVM node {url} does not answer (CHAIN_RPC_URL)")
    from chain.devnet import start_anvil

    try:
        # A block every second, as a real chain makes them: with anvil's default (a block per
        # transaction only) the indexer, which stays `INDEXER_CONFIRMATIONS` blocks below the
        # head, would not see the last transactions until more were sent.
        # `--state`: the chain (blocks, contracts, rounds) survives a restart of the fleet, as
        # the database does; saved every few seconds too, in case anvil is killed.
        state = var_dir / "chain" / "anvil-state.json"
        state.parent.mkdir(parents=True, exist_ok=True)
        anvil = start_anvil(
            port=parts.port or 8545,
            chain_id=31337,
            extra=("--block-time", "1", "--state", str(state), "--state-interval", "5"),
        )
    except (OSError, RuntimeError) as exc:
        raise LaunchError(f"cannot start anvil ({exc}); run `npm ci` to install it") from exc
    return Service(
        "EVM node (anvil)",
        anvil.url,
        embedded=True,
        detail="chain id 31337, a block per second, state kept in var/chain/",
        stop=anvil.stop,
        variables=("CHAIN_RPC_URL",),
    )


def deploy(env: dict[str, str], log: Path) -> str:
    """`fleet chain deploy --dev` against the node in `env`; returns its one-line summary."""
    fleet = Path(sys.executable).with_name("fleet")
    argv = [str(fleet) if fleet.exists() else "fleet", "chain", "deploy", "--dev", "--if-missing"]
    argv.append("--json")
    with open(log, "ab") as out:
        done = subprocess.run(
            argv, env=env, stdout=subprocess.PIPE, stderr=out, timeout=120, check=False
        )
    if done.returncode != 0:
        raise LaunchError(f"deploying the reference contracts failed (see {log})")
    result = json.loads(done.stdout)
    return ", ".join(f"{k} {v}" for k, v in result.items() if k not in ("chain_id", "operator"))
