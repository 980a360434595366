"""API keys: `X-API-Key: <key>` resolves the calling org (401 without a known key)."""

# No `from __future__ import annotations`: FastAPI reads these dependencies' annotations, which
# name functions local to the factories below.
import hmac
from collections.abc import Callable
from typing import Annotated
from uuid import UUID

from fastapi import Depends, Header, HTTPException

from .settings import Caller, ProductSettings


def caller_dependency(settings: ProductSettings) -> Callable[..., Caller]:
    callers = [(key.encode(), Caller.of(spec)) for key, spec in settings.keys.items()]

    def caller(x_api_key: Annotated[str | None, Header()] = None) -> Caller:
        given = (x_api_key or "").encode()
        found = None
        for key, who in callers:  # compare with every key, in constant time each
            if hmac.compare_digest(given, key):
                found = who
        if found is None:
            raise HTTPException(
                401, "missing or unknown API key (header X-API-Key)", {"WWW-Authenticate": "ApiKey"}
            )
        return found

    return caller


def org_dependency(caller: Callable[..., Caller]) -> Callable[..., UUID]:
    def org(who: Annotated[Caller, Depends(caller)]) -> UUID:
        return who.org_id

    return org


def admin_dependency(caller: Callable[..., Caller]) -> Callable[..., str]:
    def admin(who: Annotated[Caller, Depends(caller)]) -> str:
        if not who.admin:
            raise HTTPException(403, "this API key may not manage dead jobs")
        return f"api-key:{who.name}"

    return admin
