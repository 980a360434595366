"""Domains register themselves: the kernel learns of them here and names none (DESIGN §1).

Each domain (each `workers/<domain>/` slice, and the scheduler) declares one `Domain` in its
`registration.py` and points the entry point group `jobfleet.domains` at it (pyproject.toml):

    [project.entry-points."jobfleet.domains"]
    <name> = "<package>.registration:DOMAIN"

A registration is plain data: everything it names is a `"module:attribute"` string loaded only
when used, so `fleet --help` or `fleet config` imports no domain code beyond the registrations.
What a domain contributes:

- `jobs`: its job declarations (`"module:JOBS"`, a tuple of `shared.jobs.spec.JobSpec` on the
  domain's payload contracts); `shared.jobs.catalog` lists every domain's, and serves each as an
  attribute under the name its module gives it.
- `settings`: its settings classes (own env prefix); `fleet config` and the README's
  configuration table list them after the kernel's.
- `commands`: its `fleet` sub-commands (a Typer app, a click command or a function).
- `processes`: its processes in the fleet (`make run`, `fleet run`, `python -m shared.launcher
  exec NAME`): workers (`dramatiq <module>`), Python modules (`python -m <module>`), and extras
  with their own port that `make run` skips when the port is busy.
- `services`: what `make run` starts for it on embedded defaults (local stand-ins for the
  servers its workers talk to).
- `demo`: scenarios of `fleet demo`.
- `migrations`: the package holding its alembic revisions.
- `retries`: the default retry policy of its queues.
- `periodic`: functions the scheduler runs on an interval (`PeriodicJob`).
- `status`: a module adding its sections to `fleet status` (`sections(settings, metrics)` and
  `render(report, out)`).
- `console`: a module adding its pages and panels to the operator console (shared/console).

Adding a domain touches no kernel file: docs/domains.md lists the files a new domain adds.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any, Literal

GROUP = "jobfleet.domains"


@dataclass(frozen=True)
class Command:
    """`fleet <name>`: `target` is a Typer app, click command or function, loaded on use."""

    name: str
    target: str
    help: str
    #: Where `fleet --help` lists it: under "Domains", or None with the fleet's own commands
    #: (for example the scheduler's `schedule`, which operates the whole fleet).
    panel: str | None = "Domains"


@dataclass(frozen=True)
class Process:
    """One process of the fleet.

    kind `worker`: `dramatiq <module>` (its `app` module, the only one that boots); kind
    `python`: `python -m <module>`. Both are fleet rows: one health port each, counted from
    HEALTH_BASE_PORT in fleet order, known to `fleet status`, compose and Kubernetes.
    An `extra` (`python -m <module>` too) is started by `make run` after the fleet on its own
    port (`port_env`, default `port`); a busy port skips it instead of stopping the fleet.
    `requires`: modules that must be importable, else the process is left out (extras only).
    `extra_ports`: further ports the extra listens on (checked like its own), as (env var,
    default). `summary`: a line `make run` prints once the extra is ready (`{url}` replaced).
    """

    name: str
    module: str
    kind: Literal["worker", "python", "extra"] = "worker"
    port_env: str | None = None
    port: int | None = None
    port_as: str | None = None  # the env var the child reads its port from (default: port_env)
    requires: tuple[str, ...] = ()
    extra_ports: tuple[tuple[str, int], ...] = ()  # (env var, default) of further listen ports
    summary: str | None = None  # one line `make run` prints once it is ready ({url} replaced)
    threads: int = 8  # a worker's `--threads` (one process each; scale out with replicas)
    #: Other domains whose services (`Domain.services`: local stand-ins for servers) it uses; its
    #: own domain's are implied. `fleet run --only` starts only the services its processes use.
    uses: tuple[str, ...] = ()

    @property
    def fleet(self) -> bool:
        return self.kind != "extra"


@dataclass(frozen=True)
class PeriodicJob:
    """A function the scheduler runs every `interval` seconds, at most one run at a time.

    `run`: `"module:function"` taking `(runtime, now)`; it must be safe with two scheduler
    replicas running at once (a lock, SKIP LOCKED rows or the job-id gate). `interval`:
    `"module:function"` returning the seconds between two runs, read (from settings) when the
    schedule is built.
    """

    name: str
    run: str
    interval: str


@dataclass(frozen=True)
class Domain:
    name: str
    #: Fleet order: rows sort by it (health ports follow), then by name.
    order: int = 100
    settings: tuple[str, ...] = ()
    commands: tuple[Command, ...] = ()
    processes: tuple[Process, ...] = ()
    services: tuple[str, ...] = ()
    demo: tuple[str, ...] = ()
    migrations: str | None = None
    retries: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    status: str | None = None
    console: str | None = None
    jobs: str | None = None
    periodic: tuple[PeriodicJob, ...] = ()


class DomainError(Exception):
    """A registration is broken (a duplicate name, a target that does not load)."""


def load_target(target: str) -> Any:
    """Import `package.module:attribute` (or a whole module without `:`)."""
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in attribute.split(".") if attribute else ():
        obj = getattr(obj, part)
    return obj


@lru_cache(maxsize=1)
def registered() -> tuple[Domain, ...]:
    """Every installed domain, in fleet order."""
    found: list[Domain] = []
    names: set[str] = set()
    for ep in entry_points(group=GROUP):
        domain = ep.load()
        if not isinstance(domain, Domain):
            raise DomainError(f"entry point {ep.name} = {ep.value} is not a shared.domains.Domain")
        if domain.name in names:
            raise DomainError(f"two domains register the name {domain.name!r}")
        names.add(domain.name)
        found.append(domain)
    return tuple(sorted(found, key=lambda d: (d.order, d.name)))


def processes() -> list[Process]:
    return [p for d in registered() for p in d.processes]


def settings_classes() -> list[type[Any]]:
    return [load_target(t) for d in registered() for t in d.settings]


def commands() -> list[Command]:
    return [c for d in registered() for c in d.commands]


def retry_defaults() -> dict[str, dict[str, int]]:
    return {q: dict(p) for d in registered() for q, p in d.retries.items()}


def migration_packages() -> list[str]:
    return [d.migrations for d in registered() if d.migrations]


def job_specs() -> list[Any]:
    """Every job declaration the domains register (`Domain.jobs`), in fleet order."""
    return [spec for _, jobs in job_modules() for spec in jobs]


def job_modules() -> list[tuple[Any, tuple[Any, ...]]]:
    """(module, declarations) of each domain's `Domain.jobs` target, in fleet order."""
    found = []
    for d in registered():
        if d.jobs:
            module_name = d.jobs.partition(":")[0]
            found.append((importlib.import_module(module_name), tuple(load_target(d.jobs))))
    return found


def periodic_jobs() -> list[PeriodicJob]:
    """The periodic jobs the domains register, in fleet order."""
    return [job for d in registered() for job in d.periodic]


def consoles() -> list[Any]:
    """The console modules the domains register (imported: the console needs them all)."""
    return [load_target(d.console) for d in registered() if d.console]


def hooks(kind: Literal["services", "demo"]) -> list[Callable[..., Any]]:
    return [load_target(t) for d in registered() for t in getattr(d, kind)]


def service_hooks(processes: Collection[str] | None = None) -> list[Callable[..., Any]]:
    """The `services` hooks the named processes use (None: every domain's): those of each
    process's own domain and of the domains it names in `Process.uses`."""
    domains = registered()
    if processes is None:
        used = {d.name for d in domains}
    else:
        used = {
            name
            for d in domains
            for p in d.processes
            if p.name in processes
            for name in (d.name, *p.uses)
        }
    return [load_target(t) for d in domains if d.name in used for t in d.services]
