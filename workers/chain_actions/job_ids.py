"""A chain action's job id (DESIGN §2): `{TYPE}-{chain_id}-{contract}-{round_id}-{address}`,
the key its journal row and its on-chain effect are deduplicated by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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

    def id_rule(self) -> dict[str, Any]:
        """The rule as index.json publishes it (docs/wire-protocol.md §1)."""
        return {"form": "chain", "action_type": self.action_type, "address": self.address_field}


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
