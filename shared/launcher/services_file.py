"""`var/run/services.json`: where a running `make run` fleet's services are.

With nothing configured, `make run` starts Redis and Postgres on free ports. A `fleet` command
in a second terminal used to fall back to the default URLs and read or write other services
than the fleet's own (`PoolTimeout`, or "6 processes ready" next to "0 consumers alive"). The
launcher writes the URLs it gave its processes here while it runs, and removes the file when it
stops; the CLI takes them for every variable the environment does not set, and says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

#: What a process of the fleet needs to reach the kernel's services (no secrets among them); the
#: domains' services name theirs (`Service.variables`: e.g. a host and a port).
EXPORTED = ("REDIS_URL", "DATABASE_URL", "VAR_DIR")
_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_SECRET = re.compile(r"PASSWORD|SECRET|TOKEN|KEY", re.IGNORECASE)


def path(var_dir: str | Path) -> Path:
    return Path(var_dir) / "run" / "services.json"


def write(
    file: Path,
    env: Mapping[str, str],
    *,
    pid: int | None = None,
    variables: Iterable[str] = (),
) -> dict[str, str]:
    """Record the kernel's service variables of `env` and the `variables` the domains' services
    name (never one whose name says it is a secret); returns them."""
    names = dict.fromkeys([*EXPORTED, *variables])
    exports = {key: env[key] for key in names if key in env and _exportable(key)}
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": pid or os.getpid(), "env": exports}, indent=2) + "\n")
    tmp.replace(file)
    return exports


def _exportable(name: str) -> bool:
    return bool(_NAME.match(name)) and not _SECRET.search(name)


def remove(file: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        file.unlink()


def read_live(file: Path) -> dict[str, str] | None:
    """The variables of the fleet that wrote `file`, if that launcher is still running."""
    try:
        data = json.loads(file.read_text())
        pid = int(data["pid"])
        exports = {str(k): str(v) for k, v in data["env"].items() if _exportable(str(k))}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a fleet killed without cleaning up: its services are gone with it
    except PermissionError:
        pass  # alive, another user's
    return exports


def shell_exports(exports: Mapping[str, str]) -> str:
    """`export A=... B=...`, ready to paste."""
    import shlex

    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in exports.items())
