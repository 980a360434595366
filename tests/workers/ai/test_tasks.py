"""The four tasks end to end: an in-process ai worker, real Redis and Postgres, and the loopback
OpenAI-compatible server."""

from __future__ import annotations

import json
from decimal import Decimal

from prometheus_client import REGISTRY

from tests.support.wait import wait_run
from tests.workers.ai.conftest import send_task, task_row, wait_task
from tests.workers.ai.fake_openai import Reply

SCHEMA = {
    "type": "object",
    "properties": {
        "total": {"type": "number"},
        "currency": {"type": "string", "enum": ["EUR", "USD"]},
    },
    "required": ["total", "currency"],
    "additionalProperties": False,
}


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_summarize_stores_the_summary_and_accounts_tokens_and_cost(ai_worker, fake_ai, db) -> None:
    # Given a price table entry for the model the worker uses (gpt-4o-mini: 0.15 / 0.60 per M)
    payload, sent = send_task("summarize", "[case:sum] " + "Le devis 2024-001 a été accepté. " * 20)
    org = payload["org_id"]
    tokens_before = _metric(
        "jobfleet_ai_tokens_total", org=org, model="gpt-4o-mini", direction="in"
    )

    row = wait_task(db, payload["entity_id"], "SUCCEEDED")
    run = wait_run(sent.job_id, "COMPLETED")

    # Then the summary is on the task, with the provider's own token counts and their price
    assert row["result"]["summary"].startswith("A summary of")
    request = fake_ai.calls("sum")[0]
    assert (
        request.body["model"] == "gpt-4o-mini" and request.body["messages"][0]["role"] == "system"
    )
    prompt_chars = sum(len(m["content"]) for m in request.body["messages"])
    assert row["tokens_in"] == prompt_chars // 4
    assert row["tokens_out"] == len(row["result"]["summary"]) // 4
    expected = (
        Decimal("0.15") * row["tokens_in"] + Decimal("0.60") * row["tokens_out"]
    ) / 1_000_000
    assert row["cost"] == expected.quantize(Decimal("0.00000001"))
    # ... in the org's usage of the day, in Prometheus, and as figures (not content) on the run
    usage = db.execute(
        "SELECT requests, tokens_in, tokens_out, cost FROM ai_usage WHERE org_id = %s", (org,)
    ).fetchall()
    assert usage == [(1, row["tokens_in"], row["tokens_out"], row["cost"])]
    tokens_after = _metric("jobfleet_ai_tokens_total", org=org, model="gpt-4o-mini", direction="in")
    assert tokens_after - tokens_before == row["tokens_in"]
    assert _metric("jobfleet_ai_cost_total", org=org, model="gpt-4o-mini") == float(row["cost"])
    assert run.result["tokens_in"] == row["tokens_in"] and "summary" not in json.dumps(run.result)


def test_extract_repairs_an_invalid_output_once(ai_worker, fake_ai, db) -> None:
    # Given a model whose first answer misses a field and whose second is valid
    fake_ai.script(
        "fix",
        Reply(content='{"total": 1250.0}'),
        Reply(content='```json\n{"total": 1250.0, "currency": "EUR"}\n```'),
    )
    payload, _ = send_task("extract", "[case:fix] Facture: 1 250,00 EUR", {"schema": SCHEMA})

    row = wait_task(db, payload["entity_id"], "SUCCEEDED")

    assert row["result"]["data"] == {"total": 1250.0, "currency": "EUR"}
    first, repair = fake_ai.calls("fix")
    assert first.body["response_format"] == {"type": "json_object"}
    # The repair shows the model its own answer and the validation error
    assert repair.body["messages"][-2] == {"role": "assistant", "content": '{"total": 1250.0}'}
    assert "'currency' is a required property" in repair.body["messages"][-1]["content"]
    assert row["calls"] == 2


def test_extract_still_invalid_after_the_repair_is_dead_with_the_errors_and_both_calls_paid(
    ai_worker, fake_ai, db
) -> None:
    fake_ai.script(
        "bad",
        Reply(content="not json at all"),
        Reply(content='{"total": "SECRET-OUTPUT", "currency": "GBP"}'),
    )
    payload, sent = send_task("extract", "[case:bad] Facture", {"schema": SCHEMA})

    run = wait_run(sent.job_id, "DEAD")
    row = task_row(db, payload["entity_id"])

    assert run.error_code == "EXTRACT_INVALID" and row["error_code"] == "EXTRACT_INVALID"
    assert "$['currency'] fails 'enum'" in run.error and "$['total'] fails 'type'" in run.error
    assert "SECRET-OUTPUT" not in run.error and "SECRET-OUTPUT" not in row["error"]
    assert row["status"] == "FAILED" and row["calls"] == 2 and len(fake_ai.calls("bad")) == 2
    requests = db.execute(
        "SELECT requests FROM ai_usage WHERE org_id = %s", (payload["org_id"],)
    ).fetchone()
    assert requests == (2,)


def test_classify_answers_one_of_the_given_labels(ai_worker, fake_ai, db) -> None:
    fake_ai.script("cls", Reply(content='{"label": "invoice"}'))
    labels = ["invoice", "quote", "other"]
    payload, _ = send_task("classify", "[case:cls] Facture n° 12", {"labels": labels})

    row = wait_task(db, payload["entity_id"], "SUCCEEDED")

    assert row["result"] == {"label": "invoice"}
    system = fake_ai.calls("cls")[0].body["messages"][0]["content"]
    assert json.dumps(labels) in system


def test_embed_through_the_openai_provider_keeps_input_order(ai_worker, fake_ai, db) -> None:
    texts = ["[case:emb] one", "[case:emb] two", "[case:emb] three"]
    payload, _ = send_task("embed", texts, {"provider": "openai"})

    row = wait_task(db, payload["entity_id"], "SUCCEEDED")

    request = fake_ai.calls("emb", "/embeddings")[0]
    assert request.body == {"model": "text-embedding-3-small", "input": texts}
    from tests.workers.ai.fake_openai import embeddings

    expected = sorted(embeddings({"input": texts})["data"], key=lambda d: d["index"])
    assert row["result"]["vectors"] == [d["embedding"] for d in expected]
    assert row["result"]["dims"] == 8 and row["model"] == "text-embedding-3-small"


def test_invalid_params_fail_at_once_without_calling_the_provider(ai_worker, fake_ai, db) -> None:
    payload, sent = send_task("classify", "[case:nolabels] text", {"labels": ["only-one"]})

    run = wait_run(sent.job_id, "DEAD")

    assert run.error_code == "INVALID_PARAMS" and run.attempt == 1
    assert task_row(db, payload["entity_id"])["status"] == "FAILED"
    assert fake_ai.calls("nolabels") == []
