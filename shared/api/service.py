"""The job-status API as a service of its own, for a product backend not written in Python (the
Node.js example API, clients/node/example): `job_router` behind a token, called server to server.

    JOB_API_TOKEN=... python -m uvicorn shared.api.service:create_app --factory --port 8183

Every request carries `Authorization: Bearer <JOB_API_TOKEN>` and `X-Jobfleet-Org: <org id>`:
the product has authenticated its user and says for which org it asks, as a Python product's
`org` dependency does for the mounted router (a job of another org is a 404). The token is the
product backend's, never a browser's: without it (or with another) every route answers 401.
"""

# No `from __future__ import annotations`: FastAPI reads the dependencies' annotations, and
# `caller` is local to `create_app`, out of reach of string annotations.
import hmac
from typing import Annotated
from uuid import UUID

from fastapi import Depends, FastAPI, Header, HTTPException

from ..config import Settings, get_settings
from .router import job_router

ORG_HEADER = "X-Jobfleet-Org"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    token = settings.job_api_token
    if not token:
        raise RuntimeError("JOB_API_TOKEN is not set: the job-status service needs a token")

    def caller(authorization: Annotated[str | None, Header()] = None) -> None:
        given = (authorization or "").removeprefix("Bearer ").encode()
        if not authorization or not hmac.compare_digest(given, token.encode()):
            raise HTTPException(401, "a bearer token (JOB_API_TOKEN) is required")

    def org(
        _: Annotated[None, Depends(caller)],
        x_jobfleet_org: Annotated[str | None, Header(alias=ORG_HEADER)] = None,
    ) -> UUID:
        try:
            return UUID(x_jobfleet_org or "")
        except ValueError:
            raise HTTPException(400, f"{ORG_HEADER}: the org id (a UUID) is required") from None

    app = FastAPI(title="jobfleet job status", docs_url=None, redoc_url=None)
    app.include_router(job_router(org=org), prefix="/jobs")

    @app.get("/health", include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
