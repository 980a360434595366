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
from collections.abc import Mapping
from pathlib import Path

#: What a process of the fleet needs to reach the fleet's services (no secrets among them).
EXPORTED = ("REDIS_URL", "DATABASE_URL", "CHAIN_RPC_URL", "SMTP_HOST", "SMTP_PORT", "VAR_DIR")


def path(var_dir: str | Path) -> Path:
    return Path(var_dir) / "run" / "services.json"


def write(file: Path, env: Mapping[str, str], *, pid: int | None = None) -> dict[str, str]:
    """Record the service variables of `env`; returns them."""
    exports = {key: env[key] for key in EXPORTED if key in env}
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": pid or os.getpid(), "env": exports}, indent=2) + "\n")
    tmp.replace(file)
    return exports


def remove(file: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        file.unlink()


def read_live(file: Path) -> dict[str, str] | None:
    """The variables of the fleet that wrote `file`, if that launcher is still running."""
    try:
        data = json.loads(file.read_text())
        pid = int(data["pid"])
        exports = {str(k): str(v) for k, v in data["env"].items() if k in EXPORTED}
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
