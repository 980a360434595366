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

import ast
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


# -- the words of the domains, in the kernel's Python code (issue 33) --------------------------
#
# Module paths are not the only way to name a domain: a job name (`"email:send"`), a queue
# (`"chain-actions"`), a setting (`SMTP_HOST`) or an identifier (`lottery_round`) in the kernel's
# code ties it to one domain as surely as an import. In code, a string that says it is an example
# ("e.g. email:send", "for example") is allowed; the kernel's prose (docstrings, comments, help
# text) names no domain either, not even as an example (`test_the_kernels_prose_...` below).

#: Words that belong to one domain (identifiers are split on `_`; strings matched as words).
#: "chain" alone is an English word (a `$ref` chain, boto3's credential chain): its compounds are not.
DOMAIN_WORDS = frozenset(
    {"email", "emails", "smtp", "evm", "anvil", "lottery", "badge", "wallet", "wallets"}
)
_COMPOUND = re.compile(r"chain[-_](?:actions|id|rpc)", re.IGNORECASE)
_WORD = re.compile(
    r"(?<![a-z0-9])(" + "|".join(sorted(DOMAIN_WORDS)) + r")(?![a-z0-9])", re.IGNORECASE
)
#: A job name (`queue:job`) or a queue of the five domains.
_JOB_NAME = re.compile(r"\b(?:email|email-seq|ai|export|doc|chain)[:][a-z_]+")
#: ("export", "doc" and "ai" alone are words too: `fleet contracts export`.)
_QUEUES = frozenset({"email", "chain-actions"})
_EXAMPLE = re.compile(r"\be\.g\.|\bfor example\b|\bsuch as\b", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _identifiers(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias):
        return [node.asname or node.name]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    return []


def code_offenders(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings or _EXAMPLE.search(node.value):
                continue
            text = node.value
            if any(p.search(text) for p in (_WORD, _COMPOUND, _JOB_NAME)) or text in _QUEUES:
                found.append(f"{where}:{line}: string {text[:80]!r}")
            continue
        for name in _identifiers(node):
            parts = {part.lower() for part in name.split("_")}
            if parts & DOMAIN_WORDS or _COMPOUND.search(name):
                found.append(f"{where}:{line}: identifier {name}")
    return found


def test_code_offenders_tell_a_domain_from_an_example() -> None:
    named = [
        'QUEUE = "email"',
        'send("chain-actions:mint")',
        'name = "email:send"',
        "def smtp_host(): pass",
        "lottery_round = 1",
        'EXPORTED = ("SMTP_HOST",)',
        "x.chain_id",
        'queue = "chain-actions"',
    ]
    plain = [
        '"""Sends email:send, for instance."""',
        "# the email queue\nx = 1",
        'help_text = "Job name, e.g. email:send."',
        'command = "export"',
        "exports = {}",
        'raise ValueError("$ref chain too deep")',
        "foreign_pre_chain = []",
        'def f():\n    """The lottery keeper."""',
    ]
    for source in named:
        assert code_offenders(source, "t"), source
    for source in plain:
        assert not code_offenders(source, "t"), source


def test_the_kernels_code_names_no_domain_word() -> None:
    found = [
        hit
        for path in kernel_files()
        if path.suffix == ".py"
        for hit in code_offenders(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, f"{len(found)} place(s) of the kernel's code name a domain:\n" + "\n".join(
        found
    )


def test_the_kernels_prose_names_no_domain_word() -> None:
    """Docstrings, comments and help text too: an example there reads "a dependency", "a
    periodic job", "a domain's worker", or names a product's own hypothetical domain."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
        for path in kernel_files()
        if path.suffix == ".py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(p.search(line) for p in (_WORD, _COMPOUND, _JOB_NAME))
    ]
    assert not found, f"{len(found)} line(s) of the kernel's prose name a domain:\n" + "\n".join(
        found
    )
