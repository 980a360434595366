"""The indexer's windows on anvil: an RPC failure mid-pass keeps every committed window and
leaves no partial one; the next pass resumes from the cursor with no gap and no duplicate."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from chain import devnet
from chain.client import ChainClient
from chain.errors import RpcUnavailable
from scheduler.chain import jobs as chain
from scheduler.chain.indexer import sync_once
from shared.runtime import Runtime
from tests.support.chain.world import World


class FlakyClient(ChainClient):
    """Fails the `fail_on`-th eth_getLogs as a node that went away would."""

    def __init__(self, inner: ChainClient, fail_on: int) -> None:
        super().__init__(inner.w3, url=inner.url)
        self.fail_on = fail_on
        self.calls = 0

    def request(self, method: str, params: list[Any]) -> Any:
        if method == "eth_getLogs":
            self.calls += 1
            if self.calls == self.fail_on:
                raise RpcUnavailable("eth_getLogs: ConnectionError")
        return super().request(method, params)


def test_an_rpc_error_mid_pass_is_retried_at_the_next_pass_without_gap_or_duplicate(
    world: World, sched_runtime: Runtime, jobs: chain.ChainJobs, db: Any
) -> None:
    a = world.accounts
    for i in range(6):
        world.buy(a[1 + i % 3])
        devnet.mine(world.client, 10)
    small = dataclasses.replace(jobs.indexer, window=15)
    flaky = FlakyClient(jobs.client, fail_on=3)

    with pytest.raises(RpcUnavailable):
        sync_once(flaky, sched_runtime.sessions, small, cancel=lambda j: "")
    cursor = db.execute("SELECT block_number FROM chain_cursor").fetchone()[0]
    assert cursor == small.start_block - 1 + 2 * small.window  # two windows committed
    indexed = db.execute("SELECT max(block_number) FROM lottery_tickets").fetchone()[0]
    assert indexed is not None and indexed <= cursor  # nothing of the failed window

    done = sync_once(jobs.client, sched_runtime.sessions, small, cancel=lambda j: "")
    assert done.cursor == world.client.block_number()
    assert db.execute(
        "SELECT count(*), count(DISTINCT (tx_hash, log_index)) FROM lottery_tickets"
    ).fetchone() == (6, 6)
    assert db.execute(
        "SELECT count(*) FROM outbox_events WHERE job_name = 'chain:mint_badge'"
    ).fetchone() == (3,)


def test_reindex_from_a_block_rebuilds_a_damaged_projection_and_stages_nothing_twice(
    world: World, sched_runtime: Runtime, jobs: chain.ChainJobs, db: Any
) -> None:
    """A damaged projection (rows deleted by hand, a round's status overwritten) rebuilt with
    `reindex` from a block: the same rows as before, the outbox staging only the follow-up that
    was never enqueued; a second run changes nothing."""
    from scheduler.chain.indexer import NothingToReindex, reindex

    a = world.accounts
    first_block = world.client.block_number() + 1
    for i in range(4):
        world.buy(a[1 + i])
    sync_once(jobs.client, sched_runtime.sessions, jobs.indexer, cancel=lambda j: "")

    def projected() -> list[Any]:
        return db.execute(
            "SELECT tx_hash, log_index, round_id, player FROM lottery_tickets ORDER BY 1, 2"
        ).fetchall()

    before = projected()
    staged_before = db.execute("SELECT count(*) FROM outbox_events").fetchone()[0]
    assert len(before) == 4 and staged_before == 4
    # Damage: two tickets gone, and one of them never had its badge enqueued.
    db.execute("DELETE FROM lottery_tickets WHERE player IN (%s, %s)", (a[3].address, a[4].address))
    db.execute("DELETE FROM indexed_actions WHERE job_id LIKE %s", (f"%{a[4].address.lower()}",))
    db.execute("DELETE FROM outbox_events WHERE job_id LIKE %s", (f"%{a[4].address.lower()}",))

    cancel = lambda j: ""  # noqa: E731
    done = reindex(jobs.client, sched_runtime.sessions, jobs.indexer, first_block, cancel=cancel)
    assert projected() == before
    assert done.logs_removed == 2 and done.logs == 4  # two left, deleted, indexed again with 2
    assert len(done.staged) == 1 and done.staged[0].endswith(a[4].address.lower())
    assert db.execute("SELECT count(*) FROM outbox_events").fetchone()[0] == staged_before

    again = reindex(jobs.client, sched_runtime.sessions, jobs.indexer, first_block, cancel=cancel)
    assert (again.logs, again.staged) == (4, [])
    assert projected() == before
    assert db.execute("SELECT count(*) FROM outbox_events").fetchone()[0] == staged_before
    with pytest.raises(NothingToReindex, match="not indexed yet"):
        reindex(jobs.client, sched_runtime.sessions, jobs.indexer, 10**6, cancel=cancel)
