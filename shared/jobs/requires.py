"""`Requires`: a row a job's worker needs and cannot create from the payload, checked at send.

Most jobs can be sent by their catalog name from any language: their worker creates its domain
row from the payload. A few cannot: say, a job on an uploaded file needs the stored bytes that
only its domain client's upload puts there.
Such a job declares what it needs, and a Python send (direct or staged) without that row fails
at once with a `PayloadError` naming the field, rather than dead-lettering `NOT_FOUND` later.
A foreign producer's send is not checked here: its worker answers `NOT_FOUND` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contracts.base import Payload
from ..errors import PayloadError


@dataclass(frozen=True)
class Requires:
    #: The domain table holding the row (its primary key `id`, scoped by `org_id`).
    table: str
    #: The payload field holding that row's id.
    field: str = "entity_id"
    #: What creates the row, for the error message.
    made_by: str = ""

    def sql(self, *, named: bool = False) -> str:
        """The existence check: psycopg placeholders, or SQLAlchemy `text()` ones (`named`)."""
        id_, org = (":id", ":org") if named else ("%(id)s", "%(org)s")
        return f"SELECT 1 FROM {self.table} WHERE id = {id_} AND org_id = {org}"

    def params(self, payload: Payload) -> dict[str, Any]:
        return {"id": getattr(payload, self.field), "org": payload.org_id}

    def missing(self, job_name: str, payload: Payload) -> PayloadError:
        made = f" ({self.made_by} creates it)" if self.made_by else ""
        return PayloadError(
            job_name,
            [
                {
                    "loc": (self.field,),
                    "msg": f"no {self.table} row {getattr(payload, self.field)} in org "
                    f"{payload.org_id}: {job_name} needs it{made}",
                }
            ],
        )
