"""The job-status API's OpenAPI document, as a product mounting `job_router` publishes it.

    python -m shared.api.openapi [PATH]     write it (default: stdout)

The routes' parameters and answers are the contract; the product's own auth dependency adds its
headers or cookies. A test pins the document (tests/contracts/openapi/), like the job payloads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

NIL_ORG = UUID(int=0)


def _org() -> UUID:
    return NIL_ORG


def _admin() -> str:
    return "operator"


def document() -> dict[str, Any]:
    from fastapi import FastAPI

    from .router import job_router

    app = FastAPI(title="jobfleet job-status API", version="1")
    app.include_router(job_router(org=_org, admin=_admin, operator=_admin), prefix="/jobs")
    return app.openapi()


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = dumps(document())
    if argv:
        Path(argv[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
