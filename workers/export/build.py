"""`export:build`: one `exports` row streamed from Postgres into one stored object.

Steps: load the row (scoped by org); a COMPLETED export answers its result again (idempotent);
check the payload against the row; validate type, format and filters (permanent errors);
discard what a crashed earlier attempt left behind (its writer token is in the checkpoint);
then count and stream the rows in one snapshot through the format into a storage writer,
reporting progress, and commit the object and its `file_objects` row.

Retries restart cleanly: the object key is fixed per export, the object appears only on
commit, and a failed, canceled or killed attempt leaves no object (the writer aborts, or the
next attempt discards the partial named in the checkpoint).
"""

from __future__ import annotations

from typing import IO, Any, cast

import structlog

from shared.db.models import FileObject
from shared.errors import JobCanceled, PermanentError
from shared.jobs.context import JobContext
from shared.storage import object_key
from workers.export.contracts import ExportBuildV2, ExportParams

from . import formats, query, registry, store
from .formats import Meta, Written
from .progress import Progress
from .wiring import Exporter

log = structlog.get_logger("jobfleet.export")


class ExportNotFound(PermanentError):
    """No such export for this org."""

    code = "NOT_FOUND"


def object_key_for(row: store.ExportRow, extension: str) -> str:
    """Built by code only: the org's prefix, the export id, the type; nothing from input."""
    return object_key("orgs", row.org_id, "exports", row.id, f"{row.type.lower()}.{extension}")


def download_name(row: store.ExportRow, extension: str) -> str:
    return f"{row.type.lower()}-{row.created_at:%Y%m%d}-{str(row.id)[:8]}.{extension}"


def build_export(payload: ExportBuildV2, job: JobContext, x: Exporter) -> dict[str, Any]:
    with x.pool.connection() as conn:
        row = store.get(conn, payload.entity_id, payload.org_id)
        if row is None:  # sent by its catalog name, not through `request_export`
            store.ensure(
                conn,
                export_id=payload.entity_id,
                org_id=payload.org_id,
                requested_by=payload.requested_by,
                type=payload.type,
                params=payload.params.model_dump(mode="json"),
            )
            row = store.get(conn, payload.entity_id, payload.org_id)
    if row is None:  # that id is another org's export
        raise ExportNotFound(f"no export {payload.entity_id} for org {payload.org_id}")
    if row.status == "COMPLETED" and row.file_object_id is not None:
        return {
            "export_id": str(row.id),
            "status": "COMPLETED",
            "rows": row.row_count,
            "already_done": True,
        }
    if row.status == "CANCELED":
        raise JobCanceled(f"export {row.id} was canceled")
    try:
        # Compared as models: a row written before a parameter was added lacks its default.
        if row.type != payload.type or _params(row.params) != payload.params:
            raise PermanentError(f"payload does not match export {row.id}", code="EXPORT_MISMATCH")
        export_type = registry.get(row.type)
        fmt = formats.get(payload.params.format)
        plan = query.plan(export_type, payload.params, row.org_id, own_job_id=job.job_id)
        _discard_leftovers(job, x)
        with x.pool.connection() as conn:
            store.mark_running(conn, row.id, row.org_id)
        stored, written = _write(row, export_type, fmt, plan, job, x)
    except BaseException as exc:
        _record_failure(row, job, x, exc)
        raise
    with x.pool.connection() as conn:
        file_object_id = store.complete(conn, row.id, row.org_id, stored, written.rows)
    return {
        "export_id": str(row.id),
        "file_object_id": str(file_object_id),
        "key": stored.key,
        "format": fmt.name,
        "rows": written.rows,
        "size_bytes": stored.size_bytes,
        "sha256": stored.sha256,
        **written.extra,
    }


def _params(stored: dict[str, Any]) -> ExportParams | None:
    try:
        return ExportParams.model_validate(stored)
    except ValueError:
        return None


def _write(
    row: store.ExportRow,
    export_type: registry.ExportType,
    fmt: formats.Format,
    plan: query.Plan,
    job: JobContext,
    x: Exporter,
) -> tuple[FileObject, Written]:
    with x.pool.connection() as conn, query.open_rows(conn, plan, as_text=fmt.as_text) as rows:
        if fmt.name == "PDF" and rows.total > x.settings.pdf_max_rows:
            raise PermanentError(
                f"{rows.total} rows is too many for a PDF report (at most {x.settings.pdf_max_rows}); "
                "use CSV, XLSX or ZIP",
                code="TOO_LARGE_FOR_PDF",
            )
        progress = Progress(rows.total, x.settings.progress_steps, _reporter(row, job, x))
        meta = Meta(
            export_id=str(row.id),
            org_id=str(row.org_id),
            title=export_type.title,
            format=fmt.name,
            generated_at=x.clock().isoformat(timespec="seconds"),
            params=row.params,
            total=rows.total,
            pdf_font=x.settings.pdf_font,
            pdf_font_bold=x.settings.pdf_font_bold,
            pdf_fallback_fonts=tuple(x.settings.pdf_fallback_fonts),
        )
        with x.storage.open_writer(object_key_for(row, fmt.extension), fmt.content_type) as writer:
            writer.on_token = lambda token: progress.save(
                {"export_id": str(row.id), "upload": token}
            )
            writer.on_token(writer.resume_token)
            batches = progress.track(rows.batches(progress.batch_size(x.settings.fetch_rows)))
            written = fmt.write(cast(IO[bytes], writer), export_type, batches, meta)
            progress.report()  # the last one: done == total
            return writer.commit(), written


def _reporter(row: store.ExportRow, job: JobContext, x: Exporter) -> Any:
    def report(done: int, total: int, checkpoint: Any) -> None:
        with x.pool.connection() as conn:
            store.set_progress(conn, row.id, row.org_id, done, total)
        job.progress(done, total, checkpoint=checkpoint)  # raises JobCanceled when asked

    return report


def _discard_leftovers(job: JobContext, x: Exporter) -> None:
    """An earlier attempt that was killed mid-write left a partial file or an open multipart
    upload; its token was checkpointed before any byte was written."""
    checkpoint = job.checkpoint
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("upload"), dict):
        x.storage.discard(checkpoint["upload"])


def _record_failure(row: store.ExportRow, job: JobContext, x: Exporter, exc: BaseException) -> None:
    if isinstance(exc, JobCanceled):
        status, code = "CANCELED", exc.code
    elif isinstance(exc, PermanentError):
        status, code = "FAILED", exc.code
    else:
        last = job.attempt >= job.max_attempts
        status, code = ("FAILED" if last else "RETRYING"), getattr(exc, "code", type(exc).__name__)
    try:
        with x.pool.connection() as conn:
            store.finish(
                conn,
                row.id,
                row.org_id,
                status=status,
                code=str(code),
                error=str(exc) or type(exc).__name__,
            )
    except Exception:  # the job's own outcome (raised by the caller) matters more
        log.exception("export.status_not_recorded", export_id=str(row.id), status=status)
