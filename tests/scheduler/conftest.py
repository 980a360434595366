"""Scheduler fixtures on top of the chain's (tests/support/chain: one anvil per session, contracts
deployed once and restored from a snapshot per test, wallets sealed under the test KEK): a runtime
whose settings index with no confirmations and keep a per-session keeper lock, and its chain
collaborators; `procs` (tests/support/procs.py) for the scheduler processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chain import devnet
from chain.settings import ChainSettings
from scheduler.chain import jobs as chain
from scheduler.settings import IndexerSettings, KeeperSettings
from shared.config import Settings
from shared.runtime import Runtime
from tests.support.chain.fixtures import (
    Workers,
    anvil,
    chain_env,
    chain_settings,
    deployed,
    workers,
    world,
)
from tests.support.chain.world import World
from tests.support.procs import ProcessGroup, procs

# The chain's fixtures, reused (one anvil per session, a snapshot per test), not redefined.
__all__ = ["Workers", "anvil", "chain_settings", "deployed", "procs", "workers", "world"]


def keeper_lock_key(settings: Settings) -> str:
    # Under the session's namespace: the runtime fixture clears it, other sessions never see it.
    return f"{settings.broker_namespace}:chain:keeper-lock"


def scheduler_overrides(settings: Settings) -> dict[str, str]:
    return {
        "INDEXER_CONFIRMATIONS": "0",
        "INDEXER_START_BLOCK": "0",
        "KEEPER_LOCK_KEY": keeper_lock_key(settings),
    }


def sched_config(settings: Settings, chain_settings: ChainSettings) -> chain.ChainConfig:
    """The chain jobs' settings: no confirmations, from block 0, a per-session keeper lock."""
    return chain.ChainConfig(
        chain_settings.model_copy(update={"confirmations": 0, "receipt_timeout_s": 10.0}),
        IndexerSettings(start_block=0),
        KeeperSettings(lock_key=keeper_lock_key(settings)),
    )


@pytest.fixture
def sched_runtime(settings: Settings, world: World) -> Iterator[Runtime]:
    rt = Runtime(settings)
    yield rt
    rt.close()


@pytest.fixture
def config(settings: Settings, chain_settings: ChainSettings) -> chain.ChainConfig:
    return sched_config(settings, chain_settings)


@pytest.fixture
def jobs(sched_runtime: Runtime, config: chain.ChainConfig) -> chain.ChainJobs:
    return chain.build(sched_runtime, config)


def now() -> datetime:
    return datetime.now(UTC)


class Schedulers(ProcessGroup):
    """`python -m scheduler` processes of this session (killed by process group at the end)."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        super().__init__(tmp, env, name="scheduler")

    def start(self, **extra: str) -> subprocess.Popen[bytes]:
        return self.spawn([sys.executable, "-m", "scheduler"], **extra)


@pytest.fixture
def schedulers(
    tmp_path: Path, anvil: devnet.Anvil, world: World, settings: Settings
) -> Iterator[Schedulers]:
    env = chain_env(
        anvil,
        **scheduler_overrides(settings),
        INDEXER_INTERVAL_MS="300",
        KEEPER_INTERVAL_MS="500",
        EMAIL_DUE_INTERVAL_S="3600",
        MAINTENANCE_INTERVAL_S="3600",
        HEALTH_PORT="0",
    )
    group = Schedulers(tmp_path, env)
    yield group
    group.stop_all()
