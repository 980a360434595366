"""`doc:extract_structured`: fields of the whole document by schema, with confidences.

The rule-based extractor always runs; when `DOC_AI_EXTRACT` is on, the document's text also
goes to the AI worker as `ai:run` (task `extract`) and the run's job id is kept next to the
rule-based result (the AI worker stores its answer on its own `ai_tasks` row).
"""

from __future__ import annotations

import uuid
from typing import Any

from shared.errors import PermanentError
from shared.jobs import catalog
from shared.jobs.context import JobContext
from workers.doc.contracts import DocExtractStructuredV1

from . import language, store
from .extract import SCHEMA_NAMES, SCHEMAS, extract
from .wiring import DocServices

#: Namespace of the ai_tasks ids derived from (document, schema): one AI task per extraction.
AI_TASK_NAMESPACE = uuid.UUID("6f0b6c52-4a57-4f55-9d5c-0c3d6c1f7a11")


def extract_structured(
    payload: DocExtractStructuredV1, job: JobContext, services: DocServices
) -> dict[str, Any]:
    schema = payload.schema_name
    if schema not in SCHEMA_NAMES:
        raise PermanentError(
            f"unknown schema {schema!r}; known: {', '.join(SCHEMA_NAMES)}", code="UNKNOWN_SCHEMA"
        )
    with services.pool.connection() as conn:
        doc = store.get_document(conn, payload.entity_id, payload.org_id)
        if doc is None:
            raise PermanentError(f"document {payload.entity_id} not found", code="NOT_FOUND")
        pages = store.page_texts(conn, doc.id)
        conn.commit()
    lang = language.majority(lang for _, _, lang in pages)
    result = extract([(page, text) for page, text, _ in pages], schema, lang)
    if services.settings.ai_extract:
        result["ai"] = request_ai(payload, result["schema"], pages, services)
    with services.pool.connection() as conn:
        conn.execute("SET LOCAL synchronous_commit TO on")
        store.save_extraction(conn, doc.id, result, lang)
    return {
        "schema": result["schema"],
        "fields": sorted(result["fields"]),
        "missing": result["missing"],
    }


def ai_json_schema(schema: str) -> dict[str, Any]:
    """The JSON Schema `ai:run` (task extract) validates the model's answer against: the fields
    the rule-based extractor reads for this document schema, each optional."""
    text: dict[str, Any] = {"type": ["string", "null"]}
    day: dict[str, Any] = {"type": ["string", "null"], "format": "date"}
    amount: dict[str, Any] = {"type": ["number", "null"]}
    properties: dict[str, Any] = {
        "number": text,
        "issue_date": day,
        **{name: day for name, _ in SCHEMAS[schema].dates},
        "total_net": amount,
        "total_gross": amount,
        "vat_amount": amount,
        "vat_rate": amount,
        "currency": {"type": ["string", "null"], "pattern": "^[A-Z]{3}$"},
        "iban": text,
        "vat_number": text,
        "supplier": text,
    }
    return {
        "title": schema,
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }


def request_ai(
    payload: DocExtractStructuredV1,
    schema: str,
    pages: list[tuple[int, str, str]],
    services: DocServices,
) -> dict[str, Any]:
    """Send `ai:run` for this extraction (the AI task id is derived, so a retry sends nothing)."""
    task_id = uuid.uuid5(AI_TASK_NAMESPACE, f"{payload.entity_id}:{schema}")
    text = "\n\f\n".join(text for _, text, _ in pages)[: services.settings.ai_max_chars]
    # By name, as any producer outside the AI domain sends it (domains import no other domain).
    sent = services.send_job(
        catalog.get("ai:run"),
        {
            "org_id": payload.org_id,
            "entity_id": task_id,
            "task": "extract",
            "input": text,
            "params": {
                "schema": ai_json_schema(schema),
                "schema_name": schema,
                "document_id": str(payload.entity_id),
            },
        },
    )
    return {"ai_task_id": str(task_id), "job_id": sent.job_id, "status": "REQUESTED"}
