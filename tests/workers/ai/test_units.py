"""Pure functions of the ai domain: error mapping, Retry-After, prices, params, output checks."""

from __future__ import annotations

from decimal import Decimal

import pytest

from shared.errors import PermanentError
from workers.ai.provider import ProviderRejected, ProviderThrottled, ProviderUnavailable
from workers.ai.providers.openai_compat import classify_error, parse_retry_after
from workers.ai.tasks import check_output, parse_params
from workers.ai.usage import price

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.mark.parametrize(
    ("status", "retry_after", "kind"),
    [
        (429, "2", ProviderThrottled),
        (429, None, ProviderThrottled),
        (503, "5", ProviderThrottled),
        (500, None, ProviderUnavailable),
        (502, None, ProviderUnavailable),
        (408, None, ProviderUnavailable),
        (400, None, ProviderRejected),
        (401, None, ProviderRejected),
        (404, "3", ProviderRejected),
    ],
)
def test_http_errors_map_to_the_failure_kinds_of_the_port(status, retry_after, kind) -> None:
    error = classify_error(status, "message from the provider", retry_after)
    assert type(error) is kind
    assert f"provider answered {status}: message from the provider" in str(error)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    assert parse_retry_after("7", now=now) == 7.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", now=now) == 30.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now=now) == 0.0  # past: now
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None) is None


def test_price_uses_the_table_per_million_tokens_and_dated_model_variants() -> None:
    prices = {
        "gpt-4o-mini": {"input": 0.15, "output": 0.60},
        "gpt-4o": {"input": 2.5, "output": 10},
    }
    assert price(prices, "gpt-4o-mini", 1_000_000, 1_000_000) == Decimal("0.75")
    assert price(prices, "gpt-4o-mini-2024-07-18", 2_000, 1_000) == Decimal("0.0009")
    assert price(prices, "gpt-4o-2024-08-06", 1_000, 0) == Decimal("0.0025")
    assert price(prices, "llama3.2", 5_000, 5_000) == Decimal(0)


def test_params_keep_producer_keys_aside_and_reject_what_cannot_run() -> None:
    parsed = parse_params("extract", {"schema": SCHEMA, "document_id": "d-1"}, "text")
    assert parsed.json_schema == SCHEMA  # type: ignore[attr-defined]
    for task, params, text, why in [
        ("extract", {"schema": "invoice"}, "text", "valid dictionary"),
        ("extract", {"schema": {"type": "nope"}}, "text", "not a valid JSON Schema"),
        ("classify", {"labels": ["a", "a"]}, "text", "unique"),
        ("summarize", {}, "   ", "non-empty text"),
        ("embed", {}, [], "1 to 2048 texts"),
        ("embed", {"provider": "elsewhere"}, "t", "provider"),
    ]:
        with pytest.raises(PermanentError, match=why) as failed:
            parse_params(task, params, text)
        assert failed.value.code == "INVALID_PARAMS"


def test_output_check_accepts_fenced_json_and_never_quotes_the_output_in_log_errors() -> None:
    assert check_output('```json\n{"n": 3}\n```', SCHEMA) == ({"n": 3}, [])
    value, errors = check_output('{"n": "SECRET"}', SCHEMA)
    assert value == {"n": "SECRET"} and len(errors) == 1
    assert "SECRET" in errors[0].for_model and "SECRET" not in errors[0].for_log
    assert errors[0].for_log == "$['n'] fails 'type': \"integer\""
    _, errors = check_output("SECRET text", SCHEMA)
    assert errors[0].for_log == "output is not JSON (line 1 column 1)"
