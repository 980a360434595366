"""Payload contracts: frozen, closed, versioned, upgraded, with precise errors."""

from __future__ import annotations

import uuid
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from shared.contracts.base import Contract, Payload
from shared.errors import InvalidPayload, PayloadError
from shared.jobs import catalog
from tests.support.jobs import ECHO, EchoV1, EchoV2
from workers.chain_actions.contracts import MintBadgeV2

ORG = uuid.UUID("6f1c2a3e-8d4b-4c6f-9a1e-2b3c4d5e6f70")
ENTITY = uuid.UUID("0d9e4c1a-7b2f-4e8a-b6c3-5a4f3e2d1c0b")


def _email(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "v": 1,
        "org_id": str(ORG),
        "entity_id": str(ENTITY),
        "template_key": "welcome",
        "recipient_email": "ana@example.com",
    }
    payload.update(changes)
    return payload


def _locs(err: PayloadError) -> set[str]:
    return {".".join(map(str, e["loc"])) for e in err.errors}


def test_a_payload_is_frozen() -> None:
    model = catalog.EMAIL_SEND.build(_email())
    with pytest.raises(ValidationError, match="frozen"):
        model.template_key = "other"  # type: ignore[misc]


def test_an_unknown_field_is_rejected_with_its_path() -> None:
    with pytest.raises(PayloadError) as err:
        catalog.EMAIL_SEND.build(_email(cc="boss@example.com"))
    assert _locs(err.value) == {"cc"}
    assert err.value.code == "INVALID_PAYLOAD" and "cc" in str(err.value)


def test_a_worker_rejects_an_unknown_field_as_invalid_payload() -> None:
    with pytest.raises(InvalidPayload, match="cc"):
        catalog.EMAIL_SEND.contract.parse(_email(cc="boss@example.com"))


@pytest.mark.parametrize("version", [9, 0, "1", True, None])
def test_an_unknown_version_is_an_invalid_payload(version: object) -> None:
    with pytest.raises(InvalidPayload, match="unknown version"):
        catalog.EMAIL_SEND.contract.parse(_email(v=version))


def test_an_unknown_version_sent_is_a_payload_error_on_v() -> None:
    with pytest.raises(PayloadError) as err:
        catalog.EMAIL_SEND.build(_email(v=2))
    assert _locs(err.value) == {"v"}


def test_a_non_object_payload_is_an_invalid_payload() -> None:
    with pytest.raises(InvalidPayload, match="must be an object"):
        catalog.EMAIL_SEND.contract.parse(["not", "an", "object"])


def test_a_payload_without_v_is_read_as_the_latest_version() -> None:
    payload = _email()
    del payload["v"]
    assert catalog.EMAIL_SEND.build(payload).v == 1


def test_an_old_version_is_upgraded_so_the_handler_sees_only_the_newest() -> None:
    old = {"v": 1, "org_id": str(ORG), "entity_id": str(ENTITY), "text": "hello"}
    parsed = ECHO.contract.parse(old)
    assert isinstance(parsed, EchoV2)
    assert (parsed.v, parsed.message, parsed.times) == (2, "hello", 1)
    built = ECHO.build(EchoV1(org_id=ORG, entity_id=ENTITY, text="hello"))
    assert built == parsed


def test_an_old_version_is_validated_as_itself_before_the_upgrade() -> None:
    with pytest.raises(InvalidPayload, match="text"):
        ECHO.contract.parse(
            {"v": 1, "org_id": str(ORG), "entity_id": str(ENTITY), "message": "v2 field"}
        )


def test_a_model_of_another_job_is_refused() -> None:
    with pytest.raises(PayloadError, match="not a payload of this job"):
        catalog.EMAIL_SEND.build(EchoV1(org_id=ORG, entity_id=ENTITY, text="x"))


def test_nested_errors_carry_their_full_field_path() -> None:
    payload = {
        "v": 1,
        "org_id": str(ORG),
        "entity_id": "not-a-uuid",
        "requested_by": str(uuid.uuid4()),
        "type": "orders",
        "params": {"format": "DOCX", "date_range": {"start": "2026-03-01", "end": "2026-01-01"}},
    }
    with pytest.raises(PayloadError) as err:
        catalog.EXPORT_BUILD.build(payload)
    assert _locs(err.value) == {"entity_id", "type", "params.format", "params.date_range"}
    assert "params.date_range: Value error, end must not be before start" in str(err.value)


@pytest.mark.parametrize(
    "bad", ["2026-11-29T22:41Z\r\nBcc: x@example.com", "line\nbreak", "carriage\rreturn"]
)
def test_cr_or_lf_in_a_single_line_field_is_rejected(bad: str) -> None:
    with pytest.raises(PayloadError) as err:
        catalog.EMAIL_SEQ_RUN_DUE.build({"v": 1, "org_id": str(uuid.UUID(int=0)), "slot": bad})
    assert _locs(err.value) == {"slot"}
    assert "must not contain CR or LF" in str(err.value)


@pytest.mark.parametrize("field", ["template_key", "recipient_email", "reply_to"])
def test_header_fields_of_an_email_reject_cr_lf(field: str) -> None:
    with pytest.raises(PayloadError) as err:
        catalog.EMAIL_SEND.build(_email(**{field: "ana@example.com\r\nBcc: eve@example.com"}))
    assert _locs(err.value) == {field}


@pytest.mark.parametrize(
    ("given", "checksummed"),
    [
        # EIP-55's own examples
        (
            "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        ),
        (
            "0xFB6916095CA1DF60BB79CE92CE3EA74C37C5D359",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        ),
        (
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        ),
    ],
)
def test_addresses_are_normalised_to_their_checksum(given: str, checksummed: str) -> None:
    model = catalog.CHAIN_MINT_BADGE.build(
        {"org_id": str(uuid.UUID(int=0)), "chain_id": 1, "contract": given, "round_id": 3,
         "player": given}
    )  # fmt: skip
    assert isinstance(model, MintBadgeV2) and model.player == model.contract == checksummed
    v1 = catalog.CHAIN_MINT_BADGE.build(
        {"v": 1, "org_id": str(uuid.UUID(int=0)), "round_id": 3, "player": given}
    )
    assert isinstance(v1, MintBadgeV2) and v1.player == checksummed and v1.chain_id == 0


@pytest.mark.parametrize(
    "bad",
    [
        "0x123",
        "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        "0xZZaeb6053f3e94c9b9a09f33669435e7ef1beaed",
        "",
    ],
)
def test_a_malformed_address_is_rejected(bad: str) -> None:
    with pytest.raises(PayloadError) as err:
        catalog.CHAIN_CLAIM_PRIZE.build(
            {
                "org_id": str(uuid.UUID(int=0)),
                "chain_id": 1,
                "contract": "0x" + "11" * 20,
                "round_id": 1,
                "winner": bad,
            }
        )
    assert _locs(err.value) == {"winner"}


def test_every_job_has_a_latest_version_with_org_id_and_a_literal_v() -> None:
    for spec in catalog.ALL:
        fields = spec.contract.latest.model_fields
        assert "org_id" in fields and fields["v"].default == max(spec.contract.by_version)
        config = spec.contract.latest.model_config
        assert config.get("frozen") is True and config.get("extra") == "forbid", spec.name


class _V1(Payload):
    v: Literal[1] = 1


class _V2(Payload):
    v: Literal[2] = 2


def test_a_contract_without_an_upgrade_between_versions_is_refused() -> None:
    with pytest.raises(ValueError, match="no upgrade from v1"):
        Contract("test:broken", (_V1, _V2))


def test_a_contract_with_versions_out_of_order_is_refused() -> None:
    with pytest.raises(ValueError, match="ascending"):
        Contract("test:broken", (_V2, _V1), {1: dict})
