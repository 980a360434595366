"""Stable job ids (DESIGN §2): derived from the work, never random.

    {org_id}:{job_name}:{entity_id}:{sha256(canonical_json(stable_part))[:16]}

Canonical JSON: keys sorted, no whitespace, UTF-8 (non-ASCII kept as is), the JSON form of the
payload as the message carries it. `tests/vectors/job_ids.json` holds vectors another language
can check itself against.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from uuid import UUID


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def stable_job_id(org_id: UUID | str, job_name: str, entity_id: object, stable_part: Any) -> str:
    digest = hashlib.sha256(canonical_json(stable_part)).hexdigest()[:16]
    return f"{org_id}:{job_name}:{entity_id}:{digest}"
