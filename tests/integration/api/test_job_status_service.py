"""The job-status API as a service of its own (`shared.api.service`), for a backend in another
language: a bearer token, then the org the backend names; another org's job is a 404."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from shared.api.service import ORG_HEADER, create_app
from shared.config import Settings
from shared.runtime import Runtime
from tests.support.jobs import ECHO


def test_it_does_not_start_without_a_token(settings: Settings) -> None:
    with pytest.raises(RuntimeError, match="JOB_API_TOKEN"):
        create_app(settings.model_copy(update={"job_api_token": None}))


def test_a_token_then_the_org_scope_every_route(runtime: Runtime, settings: Settings) -> None:
    client = TestClient(create_app(settings.model_copy(update={"job_api_token": "s3cret"})))
    org, other = uuid.uuid4(), uuid.uuid4()
    sent = ECHO.send({"org_id": org, "entity_id": uuid.uuid4(), "message": "hi"})
    path = f"/jobs/{sent.job_id}"

    assert client.get(path).status_code == 401
    assert (
        client.get(path, headers={"Authorization": "Bearer nope", ORG_HEADER: str(org)}).status_code
        == 401
    )
    assert client.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 400
    mine = client.get(path, headers={"Authorization": "Bearer s3cret", ORG_HEADER: str(org)})
    assert mine.status_code == 200 and mine.json()["job_id"] == sent.job_id
    theirs = client.get(path, headers={"Authorization": "Bearer s3cret", ORG_HEADER: str(other)})
    assert theirs.status_code == 404
