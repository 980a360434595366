"""The kernel names no domain (DESIGN §1): no file under `shared/` refers to a worker package,
the scheduler package or the example product API as code.

Every text file under `shared/` is read (Python, Lua, SQL, templates, Mako, JSON, scripts...)
and each line is matched against the patterns below; the failure lists `file:line: text` of each
offender. What counts as naming a domain:

- a module or file path of a worker: `workers.email`, `workers/doc/store.py`;
- a module or file path of the scheduler: `scheduler.chain`, `scheduler/`, `scheduler:app`,
  `python -m scheduler`, `from scheduler ...`, `import scheduler`;
- the example product API: `examples.product_api`, `examples/product_api`.

Allowed: plain words ("the scheduler", "the workers."), attribute names such as
`overview.scheduler.error` (preceded by a dot), and the placeholder of the convention
`workers.<domain>` (a `<` after the dot): they name no package.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "shared"

# Not preceded by a word character, a dot or a dash: `o.scheduler.x`, `my-workers/` are not ours.
_START = r"(?<![\w.-])"
PATTERNS = {
    "worker package": re.compile(_START + r"workers[./](?=[A-Za-z_])"),
    "scheduler package": re.compile(_START + r"scheduler(?:/|[.:](?=[A-Za-z_]))"),
    "scheduler module": re.compile(r"-m\s+scheduler\b"),
    "import": re.compile(r"\b(?:from|import)\s+(?:workers|scheduler|examples)\b"),
    "example product API": re.compile(r"\bexamples[./]product_api\b"),
}


def kernel_files() -> list[Path]:
    return sorted(
        p
        for p in KERNEL.rglob("*")
        if p.is_file() and "__pycache__" not in p.relative_to(ROOT).parts
    )


def offenders() -> list[str]:
    found = []
    for path in kernel_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary: names nothing
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in PATTERNS.items():
                if pattern.search(line):
                    where = f"{path.relative_to(ROOT)}:{number}"
                    found.append(f"{where}: {what}: {line.strip()[:160]}")
                    break
    return found


def test_patterns_tell_code_from_words() -> None:
    named = [
        "from workers.email.client import schedule_email",
        "import scheduler",
        "dramatiq workers.doc.app",
        '"target": "scheduler.cli:app"',
        "see workers/doc/store.py",
        "the scheduler/ package",
        "python -m scheduler",
        "examples.product_api.app:app",
    ]
    plain = [
        "shares the GIL with the workers.",
        "the scheduler runs the periodic jobs",
        "- scheduler: runs by job and outcome",
        "{{ o.scheduler.error }}",
        "`dramatiq workers.<domain>.app`",
    ]
    for line in named:
        assert any(p.search(line) for p in PATTERNS.values()), line
    for line in plain:
        assert not any(p.search(line) for p in PATTERNS.values()), line


def test_kernel_names_no_domain() -> None:
    assert kernel_files(), f"no files under {KERNEL}"
    found = offenders()
    assert not found, f"{len(found)} line(s) of the kernel name a domain:\n" + "\n".join(found)
