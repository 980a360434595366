"""Doc worker throughput: pages/s for born-digital and scanned (OCR) pages, and the end-to-end
time of a 100-page document through 2 worker processes.

    .venv/bin/python bench/doc.py [--pages 100] [--ocr-pages 4] [--repeat 3] [--threads 4]

- born-digital pages/s: `extract_page` (PDFium text layer + language vote) over every page of a
  generated N-page PDF, one thread: the per-page work of doc:ocr without the queue.
- OCR pages/s: the same on a scanned PDF (each page an image of text, no text layer):
  render at DOC_OCR_DPI (300) + Tesseract fra+eng; one page at a time, then 2 at a time
  (2 cores).
- end to end: `dramatiq workers.doc.app --processes 2 --threads T`; upload (storage + rows), send
  doc:ingest, and wait until the document is READY: ingest, N doc:ocr jobs (tracked, with the
  fan-in count), extract_structured and index_search. Seconds from send to READY; medians.
Runs in its own database and broker namespace (bench/sandbox.py), dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# This process (its runtime, the doc modules it runs) logs warnings only; the worker its own.
os.environ["LOG_LEVEL"] = "WARNING"

import psycopg  # noqa: E402

from bench.sandbox import Sandbox  # noqa: E402
from shared.config import Settings  # noqa: E402
from workers.doc.settings import DocSettings  # noqa: E402

ORG = uuid.UUID("6be2c4a0-0000-4000-8000-00000000d0c1")
PAGE = (
    """FACTURE N° FAC-2024-{n:04d}
Date de facture : 12/03/2024
Prestation de conseil, page {n}. Le paiement est dû à trente jours.
Total HT : 1 200,00 €   TVA 20 % : 240,00 €   Total TTC : 1 440,00 €
"""
    + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 12
)


def text_pdf(pages: int) -> bytes:
    from tests.workers.doc.pdfs import text_pdf as make

    return make([PAGE.format(n=n) for n in range(1, pages + 1)])


def scanned_pdf(pages: int) -> bytes:
    import io

    import pypdfium2 as pdfium
    from fpdf import FPDF

    source = pdfium.PdfDocument(text_pdf(pages))
    pdf = FPDF()
    try:
        for i in range(pages):
            image = source[i].render(scale=200 / 72, grayscale=True).to_pil()
            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
            pdf.add_page()
            pdf.image(io.BytesIO(buffer.getvalue()), x=0, y=0, w=210, h=297)
    finally:
        source.close()
    return bytes(pdf.output())


def pages_per_second(data: bytes, settings: DocSettings, parallel: int) -> tuple[float, str]:
    from workers.doc.ocr import Tesseract
    from workers.doc.pages import extract_page
    from workers.doc.pdf import inspect
    from workers.doc.wiring import DocServices

    tesseract = Tesseract(settings.tesseract_cmd, settings.ocr_languages, settings.ocr_timeout_s)
    services = DocServices(
        settings=settings,
        pool=None,  # type: ignore[arg-type]
        storage=None,  # type: ignore[arg-type]
        send_job=None,  # type: ignore[arg-type]
        recognize=tesseract.recognize,
    )
    n = inspect(data).pages
    started = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        outcomes = list(pool.map(lambda p: extract_page(data, p, services), range(1, n + 1)))
    seconds = time.perf_counter() - started
    methods = {o.method for o in outcomes}
    return n / seconds, ",".join(sorted(m or "" for m in methods))


def wait_ready_logs(
    path: Path, proc: subprocess.Popen[bytes], count: int, timeout: float = 90
) -> None:
    deadline = time.monotonic() + timeout
    while path.read_text(errors="replace").count('"worker.ready"') < count:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"doc worker not ready:\n{path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)


def end_to_end(sandbox: Sandbox, data: bytes, storage_root: str, timeout: float) -> float:
    from shared.jobs import catalog
    from shared.runtime import Runtime, set_runtime
    from shared.storage.backends.local import LocalBackend
    from workers.doc.contracts import DocIngestV1
    from workers.doc.source import upload

    runtime = Runtime(sandbox.settings)
    previous = set_runtime(runtime)
    try:
        storage = LocalBackend(storage_root, "jobfleet")
        with psycopg.connect(sandbox.dsn) as conn:
            up = upload(conn, storage, ORG, data, filename="bench.pdf")
        started = time.perf_counter()
        catalog.DOC_INGEST.send(
            DocIngestV1(org_id=ORG, entity_id=up.document_id, file_object_id=up.file_object_id)
        )
        deadline = time.monotonic() + timeout
        with psycopg.connect(sandbox.dsn, autocommit=True) as conn:
            while True:
                row = conn.execute(
                    "SELECT status, pages_done, pages_total FROM documents WHERE id = %s",
                    (up.document_id,),
                ).fetchone()
                if row and row[0] in ("READY", "FAILED"):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"document not READY after {timeout}s: {row}")
                time.sleep(0.02)
        seconds = time.perf_counter() - started
        if row[0] != "READY":
            raise RuntimeError(f"document {up.document_id} ended {row}")
        return seconds
    finally:
        set_runtime(previous)
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=100, help="pages of the born-digital document")
    parser.add_argument("--ocr-pages", type=int, default=4, help="pages of the scanned document")
    parser.add_argument(
        "--e2e-ocr-pages", type=int, default=0, help="also run a scanned document end to end"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4, help="threads per worker process")
    args = parser.parse_args()
    base, doc = Settings(), DocSettings()
    digital = text_pdf(args.pages)
    scanned = scanned_pdf(args.ocr_pages)

    rates = [pages_per_second(digital, doc, 1)[0] for _ in range(args.repeat)]
    print(f"born-digital pages/s (1 thread, {args.pages} pages): {statistics.median(rates):,.0f}")
    ocr1, method = pages_per_second(scanned, doc, 1)
    ocr2, _ = pages_per_second(scanned, doc, 2)
    print(
        f"OCR pages/s ({method}, {doc.ocr_dpi} dpi, {args.ocr_pages} pages): {ocr1:.2f} one at a time, {ocr2:.2f} two at a time"
    )

    sandbox = Sandbox(base)
    logs = Path(tempfile.mkdtemp(prefix="jobfleet-bench-doc-"))
    proc = None
    try:
        sandbox.create()
        storage_root = str(logs / "storage")
        env = sandbox.env(STORAGE_LOCAL_ROOT=storage_root, LOG_FORMAT="json", LOG_LEVEL="INFO")
        log_path = logs / "worker.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dramatiq", "workers.doc.app", "--processes", "2",
                 "--threads", str(args.threads), "--skip-logging"],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        wait_ready_logs(log_path, proc, 2)
        times = [end_to_end(sandbox, digital, storage_root, 300) for _ in range(args.repeat)]
        print(
            f"end to end, {args.pages}-page born-digital document, 2 processes x {args.threads} threads: "
            f"median {statistics.median(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)}) "
            f"= {args.pages / statistics.median(times):.0f} pages/s"
        )
        if args.e2e_ocr_pages:
            t = end_to_end(sandbox, scanned_pdf(args.e2e_ocr_pages), storage_root, 1200)
            print(
                f"end to end, {args.e2e_ocr_pages}-page scanned document: {t:.1f} s = {args.e2e_ocr_pages / t:.2f} pages/s"
            )
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
        sandbox.destroy()


if __name__ == "__main__":
    main()
