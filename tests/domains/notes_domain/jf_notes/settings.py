"""The domain's settings: own env prefix `NOTES_`."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.config import DomainSettings, settings_for


class NotesSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="NOTES_")

    max_words: int = Field(default=1_000, description="Longest note indexed, in words")


def notes_settings() -> NotesSettings:
    return settings_for(NotesSettings)
