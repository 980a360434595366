"""The dedup window's default is one day (issue 35: sized for producers' retries, not for the run
retention), and the Node.js kit's default is the fleet's, so both kinds of producer keep a job id
taken equally long (docs/wire-protocol.md)."""

from __future__ import annotations

import math
import re
from pathlib import Path

from shared.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_window_is_one_day_whatever_the_retention() -> None:
    settings = Settings(_env_file=None, run_retention_days=90)  # type: ignore[call-arg]
    assert settings.dedup_window_s == 86_400 and settings.dedup_window_ms == 86_400_000


def test_the_node_kits_default_window_is_the_fleets() -> None:
    source = (ROOT / "clients" / "node" / "src" / "send.ts").read_text()
    found = re.search(r"DEFAULT_DEDUP_WINDOW_MS = ([\d\s*_]+);", source)
    assert found, "DEFAULT_DEDUP_WINDOW_MS is not a product of integers any more"
    node_ms = math.prod(int(f.replace("_", "")) for f in found.group(1).split("*"))
    assert node_ms == Settings.model_fields["dedup_window_s"].default * 1000
