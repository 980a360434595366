"""The doc domain's settings (`DocSettings`, `DOC_*`): upload limits, page OCR, extraction."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.config import DomainSettings, settings_for


class DocSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="DOC_")

    max_bytes: int = Field(
        default=50 * 1024 * 1024, ge=1, description="Largest document doc:ingest accepts (bytes)"
    )
    max_pages: int = Field(
        default=500, ge=1, description="Most pages doc:ingest accepts in one document"
    )
    text_min_chars: int = Field(
        default=16,
        ge=0,
        description="A page whose text layer has fewer characters is OCR'd as a scan",
    )
    tesseract_cmd: str = Field(
        default="tesseract", description="Tesseract binary (Debian: tesseract-ocr)"
    )
    ocr_languages: str = Field(
        default="fra+eng", description="Tesseract languages of scanned pages"
    )
    ocr_dpi: int = Field(
        default=300, ge=72, le=600, description="Resolution scanned pages are rendered at for OCR"
    )
    ocr_timeout_s: float = Field(
        default=120.0, gt=0, description="Longest Tesseract run on one page"
    )
    ai_extract: bool = Field(
        default=False,
        description="Also send ai:run (task extract) for each extraction (needs the AI worker)",
    )
    ai_max_chars: int = Field(
        default=20_000, ge=1, description="Document text sent to ai:run, truncated"
    )


def doc_settings() -> DocSettings:
    """The process's doc settings (read once; `get_settings.cache_clear()` forgets them)."""
    return settings_for(DocSettings)


__all__ = ["DocSettings", "doc_settings"]
