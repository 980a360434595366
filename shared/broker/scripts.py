"""The text of the broker's Lua scripts (`lua/`), with their shared parts put in place.

Redis runs each script on its own: one cannot load another. A part several scripts need (the
slots given back by `release.lua` and `ack_many.lua`: `slots.lua`) lives in one file, and a
script names it on a line of its own, `--#include <file>` (a Lua comment, so the file stays
valid Lua); `source` replaces that line with the file's text when the script is loaded, once per
process. Redis sees one script, so its SHA (and `EVALSHA`) is that of the composed text.
"""

from __future__ import annotations

import re
from importlib import resources

_INCLUDE = re.compile(r"^--#include ([\w.-]+\.lua)$", re.MULTILINE)


def _read(name: str) -> str:
    return resources.files(__package__).joinpath("lua", name).read_text(encoding="utf-8")


def source(name: str) -> str:
    """The script `lua/<name>` as Redis runs it: each `--#include <file>` line replaced by the
    text of `lua/<file>` (one level: a part includes nothing)."""

    def part(match: re.Match[str]) -> str:
        text = _read(match.group(1))
        if _INCLUDE.search(text):
            raise ValueError(f"lua/{match.group(1)} includes another part: one level only")
        return text.rstrip("\n")

    return _INCLUDE.sub(part, _read(name))
