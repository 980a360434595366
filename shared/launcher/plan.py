"""The fleet as a table: one row per supervised process (the single source of command lines).

The rows come from the domains' registrations (shared/domains.py), in fleet order: each
domain's workers (`dramatiq workers.<domain>.app`) and Python processes (the scheduler), each
with its own health port counted from HEALTH_BASE_PORT. `make run-<row>` (for example
`make run-worker-<domain>`) runs `python -m shared.launcher exec <row>`, which executes its row; the supervisor of
`make run` starts every row. So the two cannot drift.

Extras are not fleet rows (compose, Kubernetes and `fleet status` know only the rows): the
kernel's operator console and the extras domains register (for example the example product
API, a domain's inbound listener), started by `make run` after the fleet on their own ports.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from ..config import Settings
from ..domains import Process, processes

#: The operator console (`shared/console`, the `api` extra): `make run` starts it after the
#: fleet's processes on `CONSOLE_PORT` (default 8190), loopback only unless auth is configured.
CONSOLE = Process(
    "console",
    "shared.console",
    kind="extra",
    port_env="CONSOLE_PORT",
    port=8190,
    requires=("uvicorn", "fastapi", "multipart", "jinja2"),
    summary="operator console: {url}/ (`fleet web`; docs/console.md)",
)


def rows() -> list[Process]:
    """The fleet's processes, in fleet order."""
    return [p for p in processes() if p.fleet]


def extras() -> list[Process]:
    """What `make run` starts after the fleet: the console, then the domains' extras."""
    return [CONSOLE, *(p for p in processes() if not p.fleet)]


def names() -> tuple[str, ...]:
    return tuple(p.name for p in rows())


def extra_names() -> tuple[str, ...]:
    return tuple(p.name for p in extras())


def workers() -> list[Process]:
    return [p for p in rows() if p.kind == "worker"]


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: tuple[str, ...]
    health_port: int
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}"

    def shell(self) -> str:
        """The command line as a shell would run it (env assignments first)."""
        assignments = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        return " ".join([*assignments, *(shlex.quote(a) for a in self.argv)])


def _bin(name: str) -> str:
    """A console script of this interpreter's environment (the venv), else the bare name."""
    candidate = Path(sys.executable).with_name(name)
    return str(candidate) if candidate.exists() else name


def worker_argv(module: str, settings: Settings, threads: int = 8) -> tuple[str, ...]:
    return (
        _bin("dramatiq"),
        module,
        "--processes", "1",
        "--threads", str(threads),
        "--skip-logging",
        "--worker-shutdown-timeout", str(settings.shutdown_grace_ms),
    )  # fmt: skip


def fleet_plan(settings: Settings, *, only: Sequence[str] = ()) -> list[ProcessSpec]:
    """Every process of the fleet, each with its own health port (`health_base_port` + row)."""
    known = names()
    unknown = sorted(set(only) - set(known))
    if unknown:
        raise ValueError(f"unknown process {', '.join(unknown)}; known: {', '.join(known)}")
    specs: list[ProcessSpec] = []
    for index, process in enumerate(rows()):
        port = settings.health_base_port + index
        env = {"HEALTH_PORT": str(port)}
        if process.kind == "worker":
            env["dramatiq_worker_timeout"] = str(settings.worker_idle_timeout_ms)
            argv = worker_argv(process.module, settings, process.threads)
        else:
            argv = (sys.executable, "-m", process.module)
        specs.append(ProcessSpec(process.name, argv, port, env))
    return [spec for spec in specs if not only or spec.name in only]


def extra_spec(process: Process, env: Mapping[str, str]) -> ProcessSpec | None:
    """An extra under `python -m <module>`, or None when its dependencies are not installed.
    Its port answers its /health (and, for the web ones, the pages)."""
    if any(find_spec(module) is None for module in process.requires):
        return None
    if find_spec(process.module.partition(".")[0]) is None:
        return None
    port_env = process.port_env or "HEALTH_PORT"
    port = int(env.get(port_env) or process.port or 0)
    spec_env = {process.port_as or port_env: str(port)}
    return ProcessSpec(process.name, (sys.executable, "-m", process.module), port, spec_env)


def extra_ports(process: Process, env: Mapping[str, str]) -> list[int]:
    """The further ports an extra listens on (e.g. a second protocol's port)."""
    return [int(env.get(name) or default) for name, default in process.extra_ports]


def find_extra(name: str) -> Process:
    for process in extras():
        if process.name == name:
            return process
    raise ValueError(f"unknown extra process {name}; known: {', '.join(extra_names())}")


def lookup(settings: Settings, name: str) -> ProcessSpec:
    return fleet_plan(settings, only=[name])[0]
