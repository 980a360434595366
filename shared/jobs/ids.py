"""Stable job ids (DESIGN §2): derived from the work, never random.

    {org_id}:{job_name}:{entity_id}:{sha256(canonical_json(stable_part))[:16]}

Canonical JSON: keys sorted, no whitespace, UTF-8 (non-ASCII kept as is), the JSON form of the
payload as the message carries it. `tests/vectors/job_ids.json` holds vectors another language
can check itself against.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def stable_job_id(org_id: UUID | str, job_name: str, entity_id: object, stable_part: Any) -> str:
    digest = hashlib.sha256(canonical_json(stable_part)).hexdigest()[:16]
    return f"{org_id}:{job_name}:{entity_id}:{digest}"


@dataclass(frozen=True)
class ChainJobId:
    """A chain action's id rule (a JobSpec's `custom_id`): its type and the payload's address
    field. `fleet contracts export` writes both in index.json for producers in other languages."""

    action_type: str
    address_field: str

    def __call__(self, payload: Any) -> str:
        return chain_job_id(
            self.action_type,
            payload.chain_id,
            payload.contract,
            payload.round_id,
            getattr(payload, self.address_field),
        )


def chain_job_id(
    action_type: str, chain_id: int, contract: str, round_id: int, address: str
) -> str:
    """`{TYPE}-{chain_id}-{contract}-{round_id}-{address}`, contract and address lower-case.

    Chain id 0 is a v1 payload (queued before ids were scoped): its v1 id
    `{TYPE}-{round_id}-{address}` is kept.
    """
    if chain_id == 0:
        return f"{action_type}-{round_id}-{address.lower()}"
    return f"{action_type}-{chain_id}-{contract.lower()}-{round_id}-{address.lower()}"
