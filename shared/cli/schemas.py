"""JSON Schema documents of every job's payload versions, as `fleet contracts export` writes them.

One file per job and version (`<queue>:<job>` v1 → `<queue>.<job>.v1.schema.json`, draft 2020-12),
plus `index.json`: job name → queue, versions, latest version and file names. A producer in any
language validates against these before sending; `tests/contracts/schemas/` pins them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.contracts.base import json_schema
from shared.jobs.spec import JobSpec

from .schema_compat import incompatibilities

DIALECT = "https://json-schema.org/draft/2020-12/schema"
INDEX = "index.json"
SUFFIX = ".schema.json"


def schema_filename(job_name: str, version: int) -> str:
    return f"{job_name.replace(':', '.')}.v{version}{SUFFIX}"


def job_schema(spec: JobSpec[Any], version: int) -> dict[str, Any]:
    model = spec.contract.by_version[version]
    schema = json_schema(model)
    return {"$schema": DIALECT, "$id": schema_filename(spec.name, version), **schema}


def index(specs: Iterable[JobSpec[Any]]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for spec in sorted(specs, key=lambda s: s.name):
        versions = sorted(spec.contract.by_version)
        entries[spec.name] = {
            "queue": spec.queue,
            "versions": versions,
            "latest": versions[-1],
            "files": {str(v): schema_filename(spec.name, v) for v in versions},
            "entity_type": spec.entity_type,
            "job_id": spec.id_rule(),
        }
    return entries


def documents(specs: Iterable[JobSpec[Any]]) -> dict[str, dict[str, Any]]:
    """File name → JSON document, the index included."""
    specs = list(specs)
    docs = {
        schema_filename(spec.name, version): job_schema(spec, version)
        for spec in specs
        for version in sorted(spec.contract.by_version)
    }
    docs[INDEX] = index(specs)
    return docs


def dumps(document: Mapping[str, Any]) -> str:
    """Stable text: sorted keys, two-space indent, UTF-8, a final newline (diff-friendly)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(directory: Path, specs: Iterable[JobSpec[Any]], *, clean: bool = False) -> list[Path]:
    """Write every document; `clean` also deletes `*.schema.json` files no job declares."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = documents(specs)
    if clean:
        for stale in directory.glob(f"*{SUFFIX}"):
            if stale.name not in docs:
                stale.unlink()
    written = []
    for name, document in sorted(docs.items()):
        path = directory / name
        path.write_text(dumps(document), encoding="utf-8")
        written.append(path)
    return written


def read(directory: Path) -> dict[str, dict[str, Any]]:
    """The documents of an exported directory (the snapshot), by file name."""
    return {
        path.name: json.loads(path.read_text("utf-8")) for path in sorted(directory.glob("*.json"))
    }


@dataclass(frozen=True)
class Drift:
    """How one exported document differs from its snapshot."""

    file: str
    #: "compatible" (refresh the snapshot), "incompatible" (needs a new `v`), "added", "removed"
    kind: str
    problems: tuple[str, ...] = ()


def drift(snapshot: Mapping[str, Any], current: Mapping[str, Any]) -> list[Drift]:
    """Every document that differs between a snapshot directory and the current contracts."""
    found = []
    for name in sorted(set(snapshot) | set(current)):
        if name not in current:
            found.append(Drift(name, "removed"))
        elif name not in snapshot:
            found.append(Drift(name, "added"))
        elif snapshot[name] != current[name]:
            problems = (
                () if name == INDEX else tuple(incompatibilities(snapshot[name], current[name]))
            )
            found.append(Drift(name, "incompatible" if problems else "compatible", problems))
    return found
