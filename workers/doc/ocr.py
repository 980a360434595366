"""Tesseract OCR through its command line (Debian `tesseract-ocr`, `-fra`, `-eng`).

The binary is run with TSV output, which carries a confidence per word: the page confidence is
the mean over recognised words, weighted by their length. A missing binary or language pack is
an `OcrUnavailable` error that names the package to install, never an empty text.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass

from shared.errors import FleetError

INSTALL_HINT = "apt-get install -y tesseract-ocr tesseract-ocr-fra tesseract-ocr-eng"


class OcrUnavailable(FleetError):
    """Tesseract (or one of its language packs) is not installed on this worker."""

    code = "OCR_UNAVAILABLE"


class OcrFailed(FleetError):
    """Tesseract failed on this page."""

    code = "OCR_FAILED"


@dataclass(frozen=True)
class OcrResult:
    text: str
    confidence: float  # 0..1
    words: int


class Tesseract:
    def __init__(
        self, cmd: str = "tesseract", languages: str = "fra+eng", timeout_s: float = 120.0
    ):
        self.cmd = cmd
        self.languages = languages
        self.timeout_s = timeout_s
        self._checked = False
        self._lock = threading.Lock()

    def binary(self) -> str:
        path = shutil.which(self.cmd)
        if path is None:
            raise OcrUnavailable(
                f"tesseract binary {self.cmd!r} not found; install it: {INSTALL_HINT}"
            )
        return path

    def check(self) -> None:
        """Fail with `OcrUnavailable` unless the binary and every configured language exist."""
        if self._checked:
            return
        with self._lock:
            if self._checked:
                return
            out = self._run([self.binary(), "--list-langs"], b"")
            installed = {line.strip() for line in out.decode(errors="replace").splitlines()[1:]}
            missing = [lang for lang in self.languages.split("+") if lang not in installed]
            if missing:
                raise OcrUnavailable(
                    f"tesseract language data missing: {', '.join(missing)}; install: {INSTALL_HINT}"
                )
            self._checked = True

    def recognize(self, image: bytes) -> OcrResult:
        """OCR one page image (PNG bytes, read from stdin)."""
        self.check()
        argv = [self.binary(), "stdin", "stdout", "-l", self.languages, "--psm", "3", "tsv"]
        return parse_tsv(self._run(argv, image).decode("utf-8", errors="replace"))

    def _run(self, argv: list[str], stdin: bytes) -> bytes:
        # One thread per Tesseract: the worker's own threads already run pages in parallel.
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        try:
            proc = subprocess.run(
                argv, input=stdin, capture_output=True, timeout=self.timeout_s, env=env, check=False
            )
        except FileNotFoundError:
            raise OcrUnavailable(
                f"tesseract binary {argv[0]!r} not found; install it: {INSTALL_HINT}"
            ) from None
        except subprocess.TimeoutExpired:
            raise OcrFailed(f"tesseract timed out after {self.timeout_s:g}s") from None
        if proc.returncode != 0:
            detail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise OcrFailed(f"tesseract exited with {proc.returncode}: {detail[0]}")
        return proc.stdout


#: A word broken at a line end by a hyphen, as OCR reads it ("docu-" then "ment"): joined when the
#: next line goes on in lower case; a capital (a name, "Jean-\nPierre") keeps its hyphen.
_BROKEN_WORD = re.compile(r"([^\W\d_])-[^\S\n]*\n[^\S\n]*(?=[^\W\d_])")


def join_hyphenated(text: str) -> str:
    """`text` with its line-end hyphenations joined ("docu-\nment" -> "document")."""

    def join(match: re.Match[str]) -> str:
        following = text[match.end()]
        return match.group(1) if following.islower() else match.group(0)

    return _BROKEN_WORD.sub(join, text)


def parse_tsv(tsv: str) -> OcrResult:
    """Text (lines and paragraphs kept) and length-weighted mean word confidence of a TSV."""
    lines: dict[tuple[str, str, str, str], list[str]] = {}
    weighted = 0.0
    chars = 0
    words = 0
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") != "5":
            continue
        word = (row.get("text") or "").strip()
        try:
            conf = float(row.get("conf") or -1)
        except ValueError:
            conf = -1
        if not word or conf < 0:
            continue
        key = (row["page_num"], row["block_num"], row["par_num"], row["line_num"])
        lines.setdefault(key, []).append(word)
        weighted += conf * len(word)
        chars += len(word)
        words += 1
    text_lines: list[str] = []
    previous: tuple[str, str, str] | None = None
    for key, line_words in lines.items():
        paragraph = key[:3]
        if previous is not None and paragraph != previous:
            text_lines.append("")
        text_lines.append(" ".join(line_words))
        previous = paragraph
    confidence = round(weighted / chars / 100, 4) if chars else 0.0
    text = join_hyphenated("\n".join(text_lines))
    return OcrResult(text=text, confidence=confidence, words=words)
