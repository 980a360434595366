"""A deployed lottery on this session's anvil, and the moves tests make on it."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from chain import devnet
from chain.abi import BADGE, LOTTERY, decode_result, encode_call
from chain.client import ChainClient
from chain.keys import Keyring

#: Fixed test KEKs (random bytes made for these tests; they protect only anvil's public dev keys).
KEK_A = base64.b64encode(bytes(range(32))).decode()
KEK_B = base64.b64encode(bytes(range(100, 132))).decode()
TICKET = 10**15
ROUND_S = 60
MIN_PLAYERS = 2


def keyring(kid: str = "a", *, keks: dict[str, str] | None = None) -> Keyring:
    from pydantic import SecretStr

    keks = keks or {"a": KEK_A}
    return Keyring.from_settings({k: SecretStr(v) for k, v in keks.items()}, kid)


@dataclass
class World:
    client: ChainClient
    accounts: list[Any]
    contracts: dict[str, str]

    @property
    def operator(self) -> Any:
        return self.accounts[0]

    def lottery_call(self, fn: str, *args: Any) -> tuple[Any, ...]:
        return decode_result(
            LOTTERY,
            fn,
            self.client.call(
                {"to": self.contracts[LOTTERY], "data": encode_call(LOTTERY, fn, *args)}
            ),
        )

    def badge_call(self, fn: str, *args: Any) -> tuple[Any, ...]:
        return decode_result(
            BADGE,
            fn,
            self.client.call({"to": self.contracts[BADGE], "data": encode_call(BADGE, fn, *args)}),
        )

    def current_round(self) -> int:
        return int(self.lottery_call("currentRoundId")[0])

    def buy(self, account: Any, count: int = 1) -> None:
        devnet.transact(
            self.client,
            account,
            self.contracts[LOTTERY],
            encode_call(LOTTERY, "buyTickets", count),
            value=count * TICKET,
        )

    def end_round(self) -> None:
        devnet.increase_time(self.client, ROUND_S + 1)

    def drawn_round(self, *players: Any) -> tuple[int, Any]:
        """A completed round with `players` (one ticket each); returns (round, winner account)."""
        round_id = self.current_round()
        for p in players:
            self.buy(p)
        self.end_round()
        devnet.transact(
            self.client, self.operator, self.contracts[LOTTERY], encode_call(LOTTERY, "requestDraw")
        )
        winner = self.lottery_call("getRound", round_id)[0][8]
        return round_id, next(a for a in self.accounts if a.address.lower() == winner.lower())

    def cancelled_round(self, player: Any) -> int:
        round_id = self.current_round()
        self.buy(player, 2)
        self.end_round()
        devnet.transact(
            self.client,
            self.operator,
            self.contracts[LOTTERY],
            encode_call(LOTTERY, "closeExpiredRound"),
        )
        return round_id

    def has_badge(self, player: str, round_id: int) -> bool:
        return bool(self.badge_call("hasBadge", player, round_id)[0])

    def nonce(self, address: str) -> int:
        return self.client.nonce(address, "latest")


def project_ticket(conn: Any, chain_id: int, lottery: str, round_id: int, player: str) -> None:
    """The `lottery_tickets` row the indexer writes for a purchase, for tests that send a mint
    without buying (the worker mints only for a player the projections know in that round)."""
    import secrets

    from chain.address import to_checksum_address

    conn.execute(
        "INSERT INTO lottery_tickets (chain_id, contract, tx_hash, log_index, block_number,"
        " round_id, player, ticket_count, amount_wei) VALUES (%s, %s, %s, 0, 0, %s, %s, 1, %s)",
        (
            chain_id,
            to_checksum_address(lottery),
            "0x" + secrets.token_hex(32),
            round_id,
            to_checksum_address(player),
            TICKET,
        ),
    )
