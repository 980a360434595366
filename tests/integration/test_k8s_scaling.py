"""compose/k8s/: each worker's KEDA ScaledObject watches the Redis list that a real send grows
(the manifests themselves: tests/unit/test_k8s.py)."""

from __future__ import annotations

import uuid

import redis

from shared.config import Settings
from shared.jobs import catalog
from shared.runtime import Runtime
from tests.unit.test_k8s import by_kind


def test_the_scaled_list_is_where_a_real_send_puts_the_message(
    runtime: Runtime, settings: Settings
) -> None:
    """listName names `<BROKER_NAMESPACE>:<queue>`: a send must grow exactly that Redis list."""
    trigger = by_kind("ScaledObject")["worker-email"]["spec"]["triggers"][0]["metadata"]
    key = trigger["listName"].replace("dramatiq:", f"{settings.broker_namespace}:", 1)
    client = redis.Redis.from_url(settings.redis_url)
    before = client.llen(key)

    catalog.EMAIL_SEND.send(
        {
            "org_id": str(uuid.uuid4()),
            "entity_id": str(uuid.uuid4()),
            "template_key": "welcome",
            "recipient_email": "ana@example.com",
            "variables": {"NAME": "Ana"},
        }
    )

    assert client.llen(key) == before + 1
    client.close()
