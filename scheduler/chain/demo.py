"""The demo's lottery round (`fleet demo`; the scheduler's `Domain.demo`): players buy tickets,
the round ends, and the fleet does the rest on its own: the scheduler's keeper requests the
draw, its indexer projects the logs and stages the badges and the prize claim through the
outbox, and the chain-actions worker sends them.

Players are anvil's public development accounts and the round is ended by moving the node's
clock (`evm_increaseTime`); their wallets are stored as custodial ones (keys sealed under the
fleet's KEK, the launcher's dev KEK under `var/chain/` when none is configured) so that the
worker can claim the prize for the winner. Dev accounts and time travel exist on a development
node only, so the scenario runs against chain id 31337 (the `make run` anvil) and is skipped
elsewhere.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from chain.settings import chain_settings
from shared.cli.scenario import Scenario
from shared.runtime import Runtime

from ..settings import keeper_settings

DEV_CHAIN_ID = 31337


def scenario(org: uuid.UUID, *, small: bool) -> Scenario:
    """One round of three players (the same in a `--small` run: a round is already light).
    The lottery belongs to no tenant: `org` is not used."""
    return Lottery()


class Lottery(Scenario):
    def __init__(self, tickets: tuple[int, ...] = (1, 2, 1)) -> None:
        super().__init__("chain")
        self.tickets = tickets
        self.round_id: int | None = None
        self.players: list[str] = []
        self._client: Any = None
        self._contracts: dict[str, str] = {}

    def _call(self, contract: str, fn: str, *args: Any) -> tuple[Any, ...]:
        from chain.abi import decode_result, encode_call

        data = encode_call(contract, fn, *args)
        raw = self._client.call({"to": self._contracts[contract], "data": data})
        return decode_result(contract, fn, raw)

    def _connect(self, rt: Runtime) -> str | None:
        """Why the round cannot run here, or None."""
        from chain.abi import BADGE, LOTTERY
        from chain.client import ChainClient
        from chain.errors import ContractNotDeployed
        from chain.registry import contract_address

        s = chain_settings()
        try:
            self._client = ChainClient.connect(s.rpc_url, timeout_s=5)
            chain_id = self._client.chain_id()
        except Exception as exc:
            return f"no EVM node answers at CHAIN_RPC_URL={s.rpc_url} ({type(exc).__name__})"
        if chain_id != DEV_CHAIN_ID:
            return (
                f"chain {chain_id} is not a development node (players and time travel need anvil)"
            )
        try:
            with rt.pool.connection() as conn:
                for name, override in (
                    (LOTTERY, s.lottery_address),
                    (BADGE, s.badge_address),
                ):
                    self._contracts[name] = contract_address(
                        conn, chain_id, name, override=override
                    )
        except ContractNotDeployed as exc:
            return str(exc)
        return None

    def _block_time(self) -> int:
        return int(self._client.request("eth_getBlockByNumber", ["latest", False])["timestamp"], 16)

    def start(self, rt: Runtime) -> None:
        from chain import devnet
        from chain.abi import LOTTERY, encode_call

        self.skipped = self._connect(rt)
        if self.skipped:
            return
        # A round left expired by an earlier run is closed by the keeper first: wait for it.
        deadline = time.monotonic() + 3 * keeper_settings().interval_ms / 1000 + 10
        while True:
            round_id = int(self._call(LOTTERY, "currentRoundId")[0])
            end_time = int(self._call(LOTTERY, "getRound", round_id)[0][1])
            if end_time > self._block_time() + 5:
                break
            if time.monotonic() > deadline:
                self.skipped = f"round {round_id} stays expired: is the scheduler's keeper running?"
                return
            time.sleep(0.5)
        self.round_id = round_id
        price = int(self._call(LOTTERY, "ticketPrice")[0])
        accounts = devnet.dev_accounts(1 + len(self.tickets))[1:]
        self._custody(rt, accounts)
        for account, count in zip(accounts, self.tickets, strict=True):
            devnet.transact(
                self._client,
                account,
                self._contracts[LOTTERY],
                encode_call(LOTTERY, "buyTickets", count),
                value=count * price,
                timeout_s=30,
            )
            self.players.append(account.address)
        # End the round now rather than in an hour: the keeper sees it ready at its next pass.
        devnet.increase_time(self._client, end_time - self._block_time() + 1)

    def _custody(self, rt: Runtime, accounts: list[Any]) -> None:
        """Players' wallets are custodial (the worker claims for the winner with its key):
        seal their keys under the fleet's KEK, as the product does when it creates a wallet."""
        from chain.keys import Keyring
        from chain.wallets import store_wallet

        chain = chain_settings()
        keks, kek_id = dict(chain.keks), chain.kek_id
        if not keks:  # a `fleet demo` shell of `make run`: the launcher's dev KEK, if it made one
            from pydantic import SecretStr

            dev = Path(rt.settings.var_dir) / "chain" / "kek.json"
            if dev.exists():
                kek = json.loads(dev.read_text())
                keks, kek_id = {kek["id"]: SecretStr(kek["key"])}, kek["id"]
        keyring = Keyring.from_settings(keks, kek_id)
        with rt.pool.connection() as conn, conn.transaction():
            for account in accounts:
                store_wallet(conn, keyring, bytes(account.key), owner_ref="fleet demo player")

    def pending(self, rt: Runtime) -> bool:
        from chain.abi import BADGE, LOTTERY

        if self.skipped or self.round_id is None:
            return False
        state = self._call(LOTTERY, "getRound", self.round_id)[0]
        if not state[9]:  # prizeClaimed
            return True
        if not all(self._call(BADGE, "hasBadge", p, self.round_id)[0] for p in self.players):
            return True
        with rt.pool.connection() as conn:  # and the indexer saw every badge
            row = conn.execute(
                "SELECT count(*) FROM badges WHERE round_id = %s AND contract = %s",
                (self.round_id, self._contracts[BADGE]),
            ).fetchone()
        return row is None or row[0] < len(self.players)

    def results(self, rt: Runtime) -> list[str]:
        from chain.abi import LOTTERY

        if self.skipped:
            return [f"lottery round skipped: {self.skipped}"]
        if self.round_id is None:
            return []
        state = self._call(LOTTERY, "getRound", self.round_id)[0]
        return [
            f"lottery round {self.round_id}: {len(self.players)} players, winner {state[8]}, "
            f"prize {int(state[5]) / 1e18:g} ETH claimed: {bool(state[9])}; a badge per player",
            "chain state: tables lottery_rounds, lottery_tickets, lottery_winners, badges,"
            " keeper_actions; `fleet chain --help`",
        ]
