"""The composition root of the doc domain: the collaborators its functions take, built once per
process on first use (never at import time); tests install their own with `set_services`.
`DocServices.settings` are the domain's (`DocSettings`); the kernel's stay on the runtime."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shared.runtime import Runtime, get_runtime

from .ocr import OcrResult, Tesseract
from .settings import DocSettings, doc_settings
from .source import FileCache

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from shared.jobs.send import SendResult
    from shared.jobs.spec import JobSpec
    from shared.storage import StorageBackend


#: Sends a job (`runtime.sender.send(spec, payload)`); swapped in unit tests.
SendJob = Callable[["JobSpec[Any]", Any], "SendResult"]


@dataclass
class DocServices:
    settings: DocSettings
    pool: ConnectionPool
    storage: StorageBackend
    send_job: SendJob
    #: OCR of one page image (PNG bytes); Tesseract by default.
    recognize: Callable[[bytes], OcrResult]
    files: FileCache = field(default_factory=FileCache)


def build_services(
    runtime: Runtime, settings: DocSettings | None = None, **overrides: Any
) -> DocServices:
    """The services of `runtime` with the doc settings (default: the process's)."""
    from shared.storage import build_storage

    settings = settings or doc_settings()
    tesseract = Tesseract(settings.tesseract_cmd, settings.ocr_languages, settings.ocr_timeout_s)

    def send_job(spec: JobSpec[Any], payload: Any) -> SendResult:
        return runtime.sender.send(spec, payload)

    parts: dict[str, Any] = {
        "settings": settings,
        "pool": runtime.pool,
        "storage": build_storage(runtime.settings),
        "send_job": send_job,
        "recognize": tesseract.recognize,
    }
    parts.update(overrides)
    return DocServices(**parts)


_lock = threading.Lock()
_services: DocServices | None = None


def get_services() -> DocServices:
    global _services
    if _services is None:
        with _lock:
            if _services is None:
                _services = build_services(get_runtime())
    return _services


def set_services(services: DocServices | None) -> DocServices | None:
    global _services
    with _lock:
        previous, _services = _services, services
    return previous
