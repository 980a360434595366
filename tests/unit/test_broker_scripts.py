"""`shared/broker/scripts.py`: a Lua script is loaded with its shared parts in place."""

from __future__ import annotations

import pytest

from shared.broker import scripts


def test_both_scripts_that_give_back_slots_carry_the_one_slots_part() -> None:
    part = scripts._read("slots.lua").rstrip("\n")
    for name in ("release.lua", "ack_many.lua"):
        text = scripts.source(name)
        assert "--#include" not in text, name
        assert text.count(part) == 1, name
        # The part's functions are defined before the script's own lines call them.
        assert text.index("local function give_back") < text.index("\ngive_back("), name


def test_a_script_without_includes_is_loaded_as_it_is() -> None:
    assert scripts.source("fetch.lua") == scripts._read("fetch.lua")


def test_a_part_that_includes_another_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"main.lua": "--#include a.lua\nreturn 1\n", "a.lua": "--#include b.lua\n"}
    monkeypatch.setattr(scripts, "_read", files.__getitem__)
    with pytest.raises(ValueError, match="one level only"):
        scripts.source("main.lua")
