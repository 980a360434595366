"""The job id test vectors (tests/vectors/job_ids.json) hold for the Python implementation."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from shared.jobs import catalog
from shared.jobs.ids import canonical_json, stable_job_id
from workers.chain_actions.job_ids import chain_job_id

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "job_ids.json").read_text("utf-8"))


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [case["name"] for case in cases]


@pytest.mark.parametrize("case", VECTORS["job_ids"], ids=_ids(VECTORS["job_ids"]))
def test_canonical_json_and_job_id_match_the_vector(case: dict[str, Any]) -> None:
    encoded = canonical_json(case["stable_part"])
    assert encoded.decode("utf-8") == case["canonical_json"]
    assert hashlib.sha256(encoded).hexdigest() == case["sha256"]
    job_id = stable_job_id(case["org_id"], case["job_name"], case["entity_id"], case["stable_part"])
    assert job_id == case["job_id"]
    assert (
        job_id == f"{case['org_id']}:{case['job_name']}:{case['entity_id']}:{case['sha256'][:16]}"
    )


@pytest.mark.parametrize("case", VECTORS["payloads"], ids=_ids(VECTORS["payloads"]))
def test_a_sent_payload_gets_the_vector_job_id(case: dict[str, Any]) -> None:
    spec = catalog.get(case["job_name"])
    model = spec.build(case["payload"])
    assert spec.job_id(model) == case["job_id"]
    if case["stable_part"] is not None:
        assert model.stable_part() == case["stable_part"]
        assert canonical_json(model.stable_part()).decode("utf-8") == case["canonical_json"]
        assert spec.entity_id(model) == case["entity_id"]
        assert (list(model.stable_fields) if model.stable_fields else None) == case["stable_fields"]


@pytest.mark.parametrize("case", VECTORS["chain"], ids=_ids(VECTORS["chain"]))
def test_chain_job_id_matches_the_vector(case: dict[str, Any]) -> None:
    job_id = chain_job_id(
        case["action_type"], case["chain_id"], case["contract"], case["round_id"], case["address"]
    )
    assert job_id == case["job_id"]


def test_the_vectors_cover_the_cases_another_language_gets_wrong() -> None:
    texts = [case["canonical_json"] for case in VECTORS["job_ids"]]
    assert any(any(ord(ch) > 127 for ch in text) for text in texts), "non-ASCII text"
    assert any("1.0" in text and "1e-07" in text for text in texts), "float formatting"
    assert any('{"z":' not in text and ':{"a":' in text for text in texts), "nested sorted keys"
    assert VECTORS["chain"] and any(c["address"] != c["address"].lower() for c in VECTORS["chain"])


def test_unrelated_fields_do_not_change_the_job_id() -> None:
    case = next(c for c in VECTORS["payloads"] if c["job_name"] == "email:send")
    changed = {**case["payload"], "variables": {"first_name": "Someone else"}, "lang": "en"}
    spec = catalog.get("email:send")
    assert spec.job_id(spec.build(changed)) == case["job_id"]
    other = {**case["payload"], "template_key": "another"}
    assert spec.job_id(spec.build(other)) != case["job_id"]


def test_nan_and_infinity_are_refused() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    with pytest.raises(ValueError):
        canonical_json({"x": float("inf")})


def test_every_job_of_the_catalog_has_a_payload_vector_and_the_file_is_generated() -> None:
    """Issue 30: a Node producer matched 5 of 7 vectors and no vector covered most jobs."""
    from tests.vectors import generate

    covered = {case["job_name"] for case in VECTORS["payloads"]}
    assert covered == set(catalog.BY_NAME), (
        f"no vector for {sorted(set(catalog.BY_NAME) - covered)}: declare an example on its "
        "contract (json_schema_extra) or a case in tests/vectors/generate.py, then run "
        "`.venv/bin/python -m tests.vectors.generate`"
    )
    exports = [c for c in VECTORS["payloads"] if c["job_name"] == "export:build"]
    assert {c["stable_part"]["params"]["bom"] for c in exports} == {True, False}
    assert generate.main(["--check"]) == 0, "run `.venv/bin/python -m tests.vectors.generate`"
