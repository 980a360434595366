"""The export domain's settings (`EXPORT_*`): the row cursor, progress reports, PDF limits and
fonts.

Read once per process with `export_settings()`; the export worker's `Exporter` (wiring.py) holds
them, so a test or benchmark passes its own. Where exports are stored and how long their links
live is the kernel's storage port (`STORAGE_*`, shared/config.py). Env var names are those of
the fleet's configuration since issue 6: `EXPORT_` + the field name.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.config import DomainSettings, StrList, settings_for


class ExportSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="EXPORT_")

    fetch_rows: int = Field(
        default=5_000, ge=100, description="Rows fetched per round trip of the export cursor"
    )
    progress_steps: int = Field(
        default=50,
        ge=20,
        le=1_000,
        description="Progress reports per export (20 = every 5 %); each checks for cancel",
    )
    pdf_max_rows: int = Field(
        default=10_000, ge=1, description="Largest PDF report; bigger exports must use CSV/XLSX/ZIP"
    )
    pdf_font: str = Field(
        default="/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        description="TrueType font embedded in PDF reports (Debian fonts-dejavu-core); "
        "empty or missing: Helvetica, Latin-1 only",
    )
    pdf_font_bold: str = Field(
        default="/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
        description="Bold face of EXPORT_PDF_FONT (empty or missing: the regular face)",
    )
    pdf_fallback_fonts: StrList = Field(
        default_factory=lambda: [
            "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
            "/usr/share/fonts/truetype/nanum/NanumGothic.ttf",
        ],
        description="TrueType fonts for the characters EXPORT_PDF_FONT lacks, tried in order "
        "(comma-separated; default: Droid Sans Fallback for Chinese and Japanese, Nanum Gothic "
        "for Korean, from Debian's fonts-droid-fallback and fonts-nanum); a character none "
        "covers prints as a replacement mark and the export's result lists it under warnings",
    )


def export_settings() -> ExportSettings:
    """The process's `ExportSettings` (read from the environment on first use)."""
    return settings_for(ExportSettings)
