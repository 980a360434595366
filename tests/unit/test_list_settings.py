"""Every list-valued setting reads its documented comma-separated form and a JSON list alike.

Before: `CONSOLE_ORGS=a,b` (the form docs/console.md gives) stopped the console with
`SettingsError: error parsing value for field "orgs"`: pydantic-settings decodes a list as JSON.
"""

from __future__ import annotations

import typing
import uuid
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from shared.config import Settings
from shared.config_doc import env_name, settings_classes
from shared.console.settings import ConsoleSettings


def _list_fields() -> list[tuple[type[BaseSettings], str, str, type]]:
    found: list[tuple[type[BaseSettings], str, str, type]] = []
    classes: list[type[BaseSettings]] = [*settings_classes(), ConsoleSettings]
    for cls in classes:
        for name, field in cls.model_fields.items():
            if typing.get_origin(field.annotation) is list:
                item = typing.get_args(field.annotation)[0]
                found.append((cls, name, env_name(name, field, cls), item))
    return found


SAMPLES: dict[type, tuple[list[Any], str, str]] = {
    str: (["a", "b"], "a, b", '["a", "b"]'),
    int: ([60, 300], "60,300", "[60, 300]"),
}
_U1, _U2 = uuid.uuid4(), uuid.uuid4()
SAMPLES[uuid.UUID] = ([_U1, _U2], f"{_U1},{_U2}", f'["{_U1}", "{_U2}"]')


def test_every_list_setting_is_found() -> None:
    names = {env for _, _, env, _ in _list_fields()}
    assert {"CONSOLE_ORGS", "OUTBOX_BACKOFF_S", "EMAIL_TRACKED_TEMPLATES"} <= names


@pytest.mark.parametrize(
    ("cls", "name", "env", "item"), _list_fields(), ids=[f[2] for f in _list_fields()]
)
def test_a_list_setting_reads_comma_separated_and_json(
    monkeypatch: pytest.MonkeyPatch, cls: type[BaseSettings], name: str, env: str, item: type
) -> None:
    expected, commas, as_json = SAMPLES[item]
    for text in (commas, as_json):
        monkeypatch.setenv(env, text)
        assert getattr(cls(), name) == expected, text
    monkeypatch.setenv(env, "")
    assert getattr(cls(), name) == []


def test_a_malformed_json_list_says_what_to_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUTBOX_BACKOFF_S", "[60, 300")
    with pytest.raises(ValidationError, match="comma-separated"):
        Settings()
