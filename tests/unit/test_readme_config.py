"""The README's configuration table is generated from `Settings` and must be kept current."""

from __future__ import annotations

from pathlib import Path

from shared.config import Settings
from shared.config_doc import block, current, env_name, table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_configuration_table_matches_the_settings_class() -> None:
    shown = current(README.read_text())
    assert shown is not None, "README.md lost its configuration table markers"
    assert shown == block(), "README.md's configuration table is out of date: run `make config-doc`"


def test_the_table_lists_every_setting_by_its_env_var() -> None:
    generated = table()
    for name, field in Settings.model_fields.items():
        assert f"| `{env_name(name, field)}` |" in generated


def test_readme_opens_with_make_run_and_make_test() -> None:
    head = README.read_text()[:800]
    assert head.index("make run") < head.index("make test")
