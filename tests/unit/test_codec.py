"""Messages to and from bytes with orjson on the hot paths (shared/broker/codec.py): the same
messages as Dramatiq's JSON encoder reads and writes, whatever the data."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
from dramatiq.encoder import PickleEncoder
from dramatiq.errors import DecodeError

from shared.broker import codec


def _message(payload: Any) -> dramatiq.Message[Any]:
    return dramatiq.Message(
        queue_name="q",
        actor_name="a:job",
        args=(payload,),
        kwargs={},
        options={"job_id": "j", "sent_at": 1764641234.1234567, "redis_message_id": "r"},
    )


def _wire(payload: str) -> bytes:
    """A message as a producer in another language could write it, `payload` verbatim."""
    return (
        '{"queue_name":"q","actor_name":"a:job","args":[' + payload + '],"kwargs":{},'
        '"options":{},"message_id":"m-1","message_timestamp":1}'
    ).encode()


@pytest.mark.parametrize(
    "payload",
    [
        {"v": 1, "text": "héllo ✓", "n": 3, "f": 0.1, "none": None, "list": [1, [2, {"x": []}]]},
        {"big": 2**70, "edge": 2**63, "neg": -(2**64)},  # orjson cannot write these: json does
        {"nul": "a\x00b", "surrogate": "\ud800"},  # json escapes a lone surrogate, orjson refuses
    ],
)
def test_what_is_encoded_reads_back_as_dramatiq_reads_it(payload: dict[str, Any]) -> None:
    message = _message(payload)
    data = codec.encode(message)
    assert json.loads(data) == json.loads(message.encode())
    assert codec.decode(data) == dramatiq.Message.decode(data) == message


@pytest.mark.parametrize(
    "payload",
    [
        "123456789012345678901234567890",  # orjson would read a float (1.2345678901234568e+29)
        "18446744073709551616",  # 2**64
        "-9223372036854775809",
        "1.0e400",  # json reads inf, orjson refuses
        "NaN",
        '"\\ud800"',
        '{"deep": ' * 50 + "1" + "}" * 50,
    ],
)
def test_data_from_other_producers_decodes_exactly_as_dramatiq_decodes_it(payload: str) -> None:
    data = _wire(payload)
    ours, theirs = codec.decode(data).args[0], dramatiq.Message.decode(data).args[0]
    if isinstance(theirs, float) and math.isnan(theirs):
        assert isinstance(ours, float) and math.isnan(ours)
    else:
        assert ours == theirs and type(ours) is type(theirs)


@pytest.mark.parametrize(
    "data", [b"\xff\xfe", b"{}", b"[1]", b'{"queue_name": "q"}', b"\xef\xbb\xbf{}"]
)
def test_what_is_no_message_is_refused_as_dramatiq_refuses_it(data: bytes) -> None:
    with pytest.raises(DecodeError):
        codec.decode(data)


@pytest.fixture
def pickle_encoder() -> Iterator[None]:
    previous = dramatiq.get_encoder()
    dramatiq.set_encoder(PickleEncoder())
    yield
    dramatiq.set_encoder(previous)


def test_another_encoder_set_with_dramatiq_is_used_as_it_is(pickle_encoder: None) -> None:
    message = _message({"v": 1})
    data = codec.encode(message)
    assert data == message.encode() and data[:1] == b"\x80"  # a pickle
    assert codec.decode(data) == message
