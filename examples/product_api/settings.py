"""The example API's own settings (env prefix `PRODUCT_API_`): where it listens and its API keys.

`PRODUCT_API_KEYS` is a JSON object `{"<key>": {"org": "<org uuid>", "name": "...", "admin":
false}}`: each key acts for one org; `admin` keys may also list and replay that org's dead jobs.
The default holds two development keys for two orgs (documented in docs/producers.md); set your
own in any shared environment.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_ORG_A = UUID("0000a000-0000-4000-8000-00000000000a")
DEV_ORG_B = UUID("0000b000-0000-4000-8000-00000000000b")


class KeySpec(BaseModel):
    org: UUID
    name: str = "api"
    admin: bool = False
    #: Who the key's requests are "requested_by" (exports); default: derived from the name.
    user: UUID | None = None


DEV_KEYS: dict[str, KeySpec] = {
    "dev-key-org-a": KeySpec(org=DEV_ORG_A, name="dev-a", admin=True),
    "dev-key-org-b": KeySpec(org=DEV_ORG_B, name="dev-b", admin=True),
}


class ProductSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PRODUCT_API_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Address uvicorn binds")
    port: int = Field(default=8180, description="Port uvicorn binds")
    keys: dict[str, KeySpec] = Field(
        default_factory=lambda: dict(DEV_KEYS),
        description='API keys: {"<key>": {"org": "<uuid>", "name": "...", "admin": false}}',
    )


@dataclass(frozen=True)
class Caller:
    """Who is calling: the org every lookup is scoped by, and a name for the audit."""

    org_id: UUID
    name: str
    admin: bool
    user_id: UUID

    @classmethod
    def of(cls, spec: KeySpec) -> Caller:
        user = spec.user or uuid.uuid5(uuid.NAMESPACE_URL, f"product-api:{spec.org}:{spec.name}")
        return cls(spec.org, spec.name, spec.admin, user)


def describe_keys(settings: ProductSettings) -> list[dict[str, Any]]:
    """The configured keys without the keys themselves (for a start-up line)."""
    return [{"org": str(s.org), "name": s.name, "admin": s.admin} for s in settings.keys.values()]
