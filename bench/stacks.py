"""Top entries of a py-spy profile in raw (collapsed) format: where a process's CPU went.

    .venv/bin/python bench/stacks.py profile.txt [--top 40] [--under FUNCTION]

`py-spy record --gil --format raw` samples only the threads holding the GIL: the Python CPU of
the process. Inclusive share: samples with the function anywhere in the stack; self share:
samples with it on top. `--under`: only the stacks through that function (e.g. `deliver`).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)")


def tops(path: Path, under: str | None = None) -> tuple[int, Counter[str], Counter[str]]:
    """(samples, inclusive counts, self counts) by `function (file)`."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_LINE.sub(")", f) for f in stack.split(";")]
        if under and not any(f.startswith(under + " ") for f in frames):
            continue
        n = int(count)
        total += n
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n
    return total, inclusive, own


def report(path: Path, top: int = 40, under: str | None = None) -> str:
    total, inclusive, own = tops(path, under)
    if not total:
        return f"{path}: no samples"
    lines = [f"{path}: {total} samples" + (f" under {under}" if under else "")]
    lines += ["  inclusive:"] + [f"  {c / total:6.1%} {k}" for k, c in inclusive.most_common(top)]
    lines += ["  self:"] + [f"  {c / total:6.1%} {k}" for k, c in own.most_common(top // 2)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--under")
    args = parser.parse_args()
    print(report(args.profile, args.top, args.under))


if __name__ == "__main__":
    main()
