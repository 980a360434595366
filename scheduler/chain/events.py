"""The lottery and badge events the indexer projects, decoded from raw `eth_getLogs` entries.

Indexed arguments come from the topics, the others from the data (ABI-encoded words). A log
whose topic0 is not one of ours (another event of the same contracts) decodes to None.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from chain.abi import BADGE, LOTTERY, event_topic
from chain.address import to_checksum_address

#: (contract artifact, event) pairs the indexer asks the node for.
EVENTS: tuple[tuple[str, str], ...] = (
    (LOTTERY, "RoundOpened"),
    (LOTTERY, "TicketsPurchased"),
    (LOTTERY, "WinnerPicked"),
    (LOTTERY, "RoundCancelled"),
    (BADGE, "BadgeMinted"),
)


@cache
def topics() -> dict[str, str]:
    """topic0 (hex) -> event name."""
    return {event_topic(contract, event): event for contract, event in EVENTS}


@dataclass(frozen=True)
class Log:
    """Where a log sits: its identity (tx_hash, log_index) and its block."""

    contract: str
    tx_hash: str
    log_index: int
    block_number: int
    block_hash: str
    block_time: datetime | None


@dataclass(frozen=True)
class Event:
    name: str
    log: Log
    args: dict[str, Any]

    @property
    def round_id(self) -> int:
        return int(self.args["round_id"])


def _word(data: bytes, i: int) -> int:
    return int.from_bytes(data[32 * i : 32 * (i + 1)], "big")


def _topic_int(topic: str) -> int:
    return int(topic, 16)


def _topic_address(topic: str) -> str:
    return to_checksum_address("0x" + topic[-40:])


def decode(raw: dict[str, Any]) -> Event | None:
    raw_topics = raw.get("topics") or []
    if not raw_topics or raw.get("removed"):
        return None
    name = topics().get(raw_topics[0].lower())
    if name is None:
        return None
    stamp = raw.get("blockTimestamp")
    log = Log(
        contract=to_checksum_address(raw["address"]),
        tx_hash=raw["transactionHash"].lower(),
        log_index=int(raw["logIndex"], 16),
        block_number=int(raw["blockNumber"], 16),
        block_hash=raw["blockHash"].lower(),
        block_time=datetime.fromtimestamp(int(stamp, 16), UTC) if stamp else None,
    )
    data = bytes.fromhex(raw.get("data", "0x")[2:])
    args: dict[str, Any]
    if name == "RoundOpened":
        args = {
            "round_id": _topic_int(raw_topics[1]),
            "ticket_price": _word(data, 0),
            "end_time": datetime.fromtimestamp(_word(data, 1), UTC),
            "min_players": _word(data, 2),
        }
    elif name == "TicketsPurchased":
        args = {
            "round_id": _topic_int(raw_topics[1]),
            "player": _topic_address(raw_topics[2]),
            "count": _word(data, 0),
            "amount": _word(data, 1),
        }
    elif name == "WinnerPicked":
        args = {
            "round_id": _topic_int(raw_topics[1]),
            "winner": _topic_address(raw_topics[2]),
            "prize": _word(data, 0),
        }
    elif name == "RoundCancelled":
        args = {"round_id": _topic_int(raw_topics[1])}
    else:  # BadgeMinted(player indexed, roundId indexed, tokenId)
        args = {
            "player": _topic_address(raw_topics[1]),
            "round_id": _topic_int(raw_topics[2]),
            "token_id": _word(data, 0),
        }
    return Event(name, log, args)


def decode_all(raws: list[dict[str, Any]]) -> list[Event]:
    """Decoded events in chain order (block, then log index)."""
    events = [e for e in (decode(r) for r in raws) if e is not None]
    events.sort(key=lambda e: (e.log.block_number, e.log.log_index))
    return events
