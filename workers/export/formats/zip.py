"""ZIP: the CSV (streamed through the deflater) and `manifest.json` (row count, checksums).

The archive is written as a stream (data descriptors, ZIP64 when needed): nothing is buffered
beyond one batch. The manifest gives the CSV's size and SHA-256 so a recipient can check it.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from typing import IO, Any

from ..registry import ExportType
from . import Batches, Format, Meta, Written
from .csv import write_csv


class _Hashing:
    """Counts and hashes what passes to the archive entry."""

    def __init__(self, entry: IO[bytes]) -> None:
        self.entry = entry
        self.size = 0
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.entry.write(data)


def write_zip(out: IO[bytes], export_type: ExportType, batches: Batches, meta: Meta) -> Written:
    name = f"{export_type.name.lower()}.csv"
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        with archive.open(name, "w", force_zip64=True) as entry:
            hashing = _Hashing(entry)
            written = write_csv(hashing, export_type, batches, meta)  # type: ignore[arg-type]
        manifest: dict[str, Any] = {
            "export_id": meta.export_id,
            "org_id": meta.org_id,
            "type": export_type.name,
            "title": meta.title,
            "generated_at": meta.generated_at,
            "params": meta.params,
            "files": [
                {
                    "name": name,
                    "content_type": "text/csv; charset=utf-8",
                    "rows": written.rows,
                    "columns": export_type.column_names(),
                    "size_bytes": hashing.size,
                    "sha256": hashing.sha256.hexdigest(),
                }
            ],
        }
        archive.writestr("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))
    return Written(written.rows, {"files": manifest["files"]})


FORMAT = Format("ZIP", "zip", "application/zip", as_text=True, write=write_zip)
