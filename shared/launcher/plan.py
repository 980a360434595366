"""The fleet as a table: one row per supervised process (the single source of command lines).

`make run-worker-email` runs `python -m shared.launcher exec worker-email`, which executes the
row below; the supervisor of `make run` starts every row. So the two cannot drift.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings

#: (process name, the worker package `dramatiq` imports), in start order.
WORKERS: tuple[tuple[str, str], ...] = (
    ("worker-email", "workers.email"),
    ("worker-ai", "workers.ai"),
    ("worker-export", "workers.export"),
    ("worker-doc", "workers.doc"),
    ("worker-chain-actions", "workers.chain_actions"),
)
SCHEDULER = "scheduler"
NAMES: tuple[str, ...] = (*(name for name, _ in WORKERS), SCHEDULER)
#: The example product API (`examples/product_api`, the `api` and `email` extras): `make run`
#: starts it after the fleet's processes, on its own port (`PRODUCT_API_PORT`, default 8180), when
#: it is installed. Not a fleet process (compose, Kubernetes and `fleet status` know only NAMES).
PRODUCT_API = "product-api"
#: The operator console (`shared/console`, the `api` extra): `make run` starts it after the fleet's
#: processes on `CONSOLE_PORT` (default 8190), loopback only unless auth is configured.
CONSOLE = "console"


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


def worker_argv(module: str, settings: Settings) -> tuple[str, ...]:
    return (
        _bin("dramatiq"),
        module,
        "--processes", "1",
        "--threads", "8",
        "--skip-logging",
        "--worker-shutdown-timeout", str(settings.shutdown_grace_ms),
    )  # fmt: skip


def fleet_plan(settings: Settings, *, only: Sequence[str] = ()) -> list[ProcessSpec]:
    """Every process of the fleet, each with its own health port (`health_base_port` + row)."""
    unknown = sorted(set(only) - set(NAMES))
    if unknown:
        raise ValueError(f"unknown process {', '.join(unknown)}; known: {', '.join(NAMES)}")
    specs: list[ProcessSpec] = []
    for index, (name, module) in enumerate(WORKERS):
        port = settings.health_base_port + index
        env = {
            "HEALTH_PORT": str(port),
            "dramatiq_worker_timeout": str(settings.worker_idle_timeout_ms),
        }
        specs.append(ProcessSpec(name, worker_argv(module, settings), port, env))
    port = settings.health_base_port + len(WORKERS)
    specs.append(
        ProcessSpec(
            SCHEDULER, (sys.executable, "-m", "scheduler"), port, {"HEALTH_PORT": str(port)}
        )
    )
    return [spec for spec in specs if not only or spec.name in only]


def _product_api_root() -> str | None:
    """Where the child finds `examples.product_api`: "" (as installed), the checkout's root
    (only the source tree has it: an editable install made before it existed), or None."""
    try:
        if importlib.util.find_spec("examples.product_api") is not None:
            return ""
    except ModuleNotFoundError:
        pass
    root = Path(__file__).resolve().parents[2]
    return str(root) if (root / "examples" / "product_api" / "__init__.py").is_file() else None


def product_api_spec(env: Mapping[str, str]) -> ProcessSpec | None:
    """The example product API under uvicorn (`python -m examples.product_api`), or None when it
    or its dependencies are not installed. Its port answers the API and its /health."""
    for module in ("uvicorn", "fastapi", "multipart", "jinja2"):
        if importlib.util.find_spec(module) is None:
            return None
    root = _product_api_root()
    if root is None:
        return None
    port = int(env.get("PRODUCT_API_PORT") or 8180)
    spec_env = {"PRODUCT_API_PORT": str(port)}
    if root:
        spec_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    argv = (sys.executable, "-m", "examples.product_api")
    return ProcessSpec(PRODUCT_API, argv, port, spec_env)


def console_spec(env: Mapping[str, str]) -> ProcessSpec | None:
    """The operator console (`python -m shared.console`, i.e. `fleet web`), or None when its
    dependencies are not installed. Its port answers the pages and its /health."""
    for module in ("uvicorn", "fastapi", "multipart", "jinja2"):
        if importlib.util.find_spec(module) is None:
            return None
    port = int(env.get("CONSOLE_PORT") or 8190)
    argv = (sys.executable, "-m", "shared.console")
    return ProcessSpec(CONSOLE, argv, port, {"CONSOLE_PORT": str(port)})


#: The email domain's inbound SMTP listener (workers/email/feedback/inbound.py): takes the
#: DSNs sent back to the VERP senders. `make run` starts it like the console (skipped when its
#: ports are busy); SMTP on EMAIL_INBOUND_PORT (2526), /health on EMAIL_INBOUND_HEALTH_PORT (8185).
EMAIL_INBOUND = "email-inbound"


def email_inbound_spec(env: Mapping[str, str]) -> ProcessSpec | None:
    """`python -m workers.email.feedback.inbound`, or None without the `email` extra."""
    if importlib.util.find_spec("aiosmtpd") is None:
        return None
    port = int(env.get("EMAIL_INBOUND_HEALTH_PORT") or 8185)
    argv = (sys.executable, "-m", "workers.email.feedback.inbound")
    return ProcessSpec(EMAIL_INBOUND, argv, port, {"HEALTH_PORT": str(port)})


def lookup(settings: Settings, name: str) -> ProcessSpec:
    return fleet_plan(settings, only=[name])[0]
