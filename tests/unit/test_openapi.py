"""The job-status API's OpenAPI document is pinned: a change to a route or a model shows in review.

Refresh on purpose after a deliberate change:
`UPDATE_SCHEMA_SNAPSHOTS=1 .venv/bin/pytest tests/unit/test_openapi.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from shared.api import openapi

PINNED = Path(__file__).parents[1] / "contracts" / "openapi" / "job-api.json"


def test_the_openapi_document_matches_its_snapshot() -> None:
    current = openapi.dumps(openapi.document())
    if os.environ.get("UPDATE_SCHEMA_SNAPSHOTS") == "1":
        PINNED.write_text(current, encoding="utf-8")
    assert json.loads(current) == json.loads(PINNED.read_text(encoding="utf-8")), (
        "the job-status API changed: if on purpose, refresh the snapshot with "
        "`UPDATE_SCHEMA_SNAPSHOTS=1 .venv/bin/pytest tests/unit/test_openapi.py`"
    )


def test_every_route_answers_a_typed_model() -> None:
    doc = openapi.document()
    routes = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    assert routes == {
        ("GET", "/jobs"),
        ("GET", "/jobs/{job_id}"),
        ("POST", "/jobs/{job_id}/cancel"),
        ("GET", "/jobs/{job_id}/events"),
        ("GET", "/jobs/dead-letters"),
        ("POST", "/jobs/dead-letters/{job_id}/replay"),
        ("GET", "/jobs/queues"),
        ("POST", "/jobs/queues/{queue}/pause"),
        ("POST", "/jobs/queues/{queue}/resume"),
    }
    schemas = doc["components"]["schemas"]
    assert {"JobView", "JobPage", "CancelResult", "ReplayResult", "Problem"} <= set(schemas)
    ok = doc["paths"]["/jobs/{job_id}"]["get"]["responses"]["200"]["content"]["application/json"]
    assert ok["schema"] == {"$ref": "#/components/schemas/JobView"}
