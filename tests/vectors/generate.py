"""Rewrite the `payloads` section of job_ids.json from the inputs below, with the Python
implementation (`shared.jobs`): a payload as a producer sends it → what validation fills, the
hashed form and the job id. Every job of the catalog has at least one case (a test checks): one
written below, or the example its contract declares (a new domain's job).

    .venv/bin/python -m tests.vectors.generate          # rewrite tests/vectors/job_ids.json
    .venv/bin/python -m tests.vectors.generate --check  # exit 1 if the file is not up to date

The `job_ids` and `chain` sections are written by hand (they pin the canonical JSON itself).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from shared.jobs import catalog
from shared.jobs.ids import canonical_json

FILE = Path(__file__).with_name("job_ids.json")
ORG = "6f1c2a3e-8d4b-4c6f-9a1e-2b3c4d5e6f70"
SYSTEM = "00000000-0000-0000-0000-000000000000"
ENTITY = "0d9e4c1a-7b2f-4e8a-b6c3-5a4f3e2d1c0b"
USER = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
PLAYER = "0xdbf03b407c01e7cd3cbea99509d93f8dddc8c6fb"
LOTTERY = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"

CASES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "email:send hashes only its stable fields; variables and lang do not change the id",
        "email:send",
        {
            "v": 1,
            "org_id": ORG,
            "entity_id": ENTITY,
            "template_key": "welcome",
            "recipient_email": "ana@example.com",
            "variables": {"first_name": "Ana", "plan": "pro"},
            "lang": "fr",
        },
    ),
    (
        "export:build: defaults filled by validation are part of the hashed form (params, bom)",
        "export:build",
        {"v": 1, "org_id": ORG, "entity_id": ENTITY, "requested_by": USER, "type": "ACCOUNTING"},
    ),
    (
        "export:build with bom: true",
        "export:build",
        {
            "v": 1,
            "org_id": ORG,
            "entity_id": ENTITY,
            "requested_by": USER,
            "type": "JOB_RUNS",
            "params": {"format": "CSV", "bom": True},
        },
    ),
    (
        "export:build with nested params (dates as ISO text; bom false is hashed too)",
        "export:build",
        {
            "v": 1,
            "org_id": ORG,
            "entity_id": ENTITY,
            "requested_by": USER,
            "type": "JOB_RUNS",
            "params": {
                "format": "XLSX",
                "filters": {"status": ["DEAD", "FAILED"]},
                "date_range": {"start": "2026-01-01", "end": "2026-03-31"},
            },
        },
    ),
    (
        "ai:run hashes entity_id and task; input and params do not change the id",
        "ai:run",
        {
            "v": 1,
            "org_id": ORG,
            "entity_id": ENTITY,
            "task": "classify",
            "input": "The invoice is overdue.",
            "params": {"labels": ["billing", "support"]},
        },
    ),
    (
        "email-seq:run_due: no stable_fields, so every field but v; the slot is the entity",
        "email-seq:run_due",
        {"v": 1, "org_id": SYSTEM, "slot": "2026-11-29T22:41Z"},
    ),
    (
        "UUIDs are hashed in their canonical lower-case form",
        "doc:ingest",
        {
            "v": 1,
            "org_id": ORG.upper(),
            "entity_id": ENTITY.upper(),
            "file_object_id": "{12345678-1234-5678-1234-567812345678}",
        },
    ),
    (
        "doc:ocr: every field but v",
        "doc:ocr",
        {"v": 1, "org_id": ORG, "entity_id": ENTITY, "page": 3},
    ),
    (
        "doc:extract_structured: the wire name of the field is `schema`",
        "doc:extract_structured",
        {"v": 1, "org_id": ORG, "entity_id": ENTITY, "schema": "invoice"},
    ),
    (
        "doc:index_search",
        "doc:index_search",
        {"v": 1, "org_id": ORG, "entity_id": ENTITY},
    ),
]
for _action, _address in (
    ("mint_badge", "player"),
    ("claim_prize", "winner"),
    ("claim_refund", "payer"),
):
    _type = _action.upper()
    CASES += [
        (
            f"chain:{_action}: a v1 payload (queued before v2) keeps the v1 id "
            f"{_type}-{{round_id}}-{{address}}",
            f"chain:{_action}",
            {"v": 1, "org_id": SYSTEM, "round_id": 12, _address: PLAYER},
        ),
        (
            f"chain:{_action}: v2, the chain form {_type}-{{chain_id}}-{{contract}}-{{round_id}}-"
            "{address} (lower-case hex)",
            f"chain:{_action}",
            {
                "v": 2, "org_id": SYSTEM, "chain_id": 31337, "contract": LOTTERY,
                "round_id": 12, _address: PLAYER,
            },
        ),
    ]  # fmt: skip


def vector(name: str, job_name: str, payload: dict[str, Any]) -> dict[str, Any]:
    spec = catalog.get(job_name)
    model = spec.build(payload)
    # Chain actions: not a hash (README.md, "Chain actions").
    stable = None if spec.custom_id is not None else model.stable_part()
    return {
        "name": name,
        "job_name": job_name,
        "payload": payload,
        "stable_fields": list(model.stable_fields) if model.stable_fields else None,
        "entity_id": None if stable is None else spec.entity_id(model),
        "stable_part": stable,
        "canonical_json": None if stable is None else canonical_json(stable).decode("utf-8"),
        "job_id": spec.job_id(model),
    }


def example_cases() -> list[tuple[str, str, dict[str, Any]]]:
    """A job no case above covers (a new domain's) gets the first example its contract declares
    (`json_schema_extra={"examples": [...]}` on its latest version)."""
    covered = {job_name for _, job_name, _ in CASES}
    found = []
    for spec in catalog.ALL:
        examples = spec.contract.latest.model_json_schema().get("examples") or []
        if spec.name not in covered and examples:
            found.append((f"{spec.name}: its contract's example", spec.name, dict(examples[0])))
    return found


def render() -> str:
    data = json.loads(FILE.read_text("utf-8"))
    data["payloads"] = [vector(*case) for case in [*CASES, *example_cases()]]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if FILE.read_text("utf-8") != text:
            print(f"{FILE} is out of date: run `.venv/bin/python -m tests.vectors.generate`")
            return 1
        return 0
    FILE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
