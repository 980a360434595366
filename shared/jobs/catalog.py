"""Every job of the fleet (DESIGN §2): the declarations the domains register. Producers send
them from here without importing a worker; workers bind their handlers to them.

Each domain declares its jobs in its own slice and names them in its registration
(`Domain.jobs = "<package>.jobs:JOBS"`, shared/domains.py); they make up `ALL`, `BY_NAME` and
`QUEUES` when this module is first imported. A job is reached by its name
(`catalog.get("<queue>:<job>")`) or, as an attribute, by the name its domain's module gives it:
`catalog.<NAME>` is the `<NAME>` that its domain's jobs module declares.
"""

from __future__ import annotations

from typing import Any

from .spec import JobSpec


def _registered() -> tuple[tuple[str, JobSpec[Any]], ...]:
    """(attribute name, declaration) of every registered job, in fleet order."""
    from ..domains import job_modules

    found: list[tuple[str, JobSpec[Any]]] = []
    for module, jobs in job_modules():
        names = {id(value): name for name, value in vars(module).items() if name.isupper()}
        found.extend((names.get(id(spec), ""), spec) for spec in jobs)
    return tuple(found)


_NAMED = _registered()
ALL: tuple[JobSpec[Any], ...] = tuple(spec for _, spec in _NAMED)
BY_NAME: dict[str, JobSpec[Any]] = {spec.name: spec for spec in ALL}
if len(BY_NAME) != len(ALL):
    _names = [spec.name for spec in ALL]
    raise ValueError(f"job declared twice: {sorted({n for n in _names if _names.count(n) > 1})}")
_BY_ATTRIBUTE: dict[str, JobSpec[Any]] = {name: spec for name, spec in _NAMED if name}
QUEUES: tuple[str, ...] = tuple(dict.fromkeys(spec.queue for spec in ALL))


def get(name: str) -> JobSpec[Any]:
    from ..errors import UnknownJob

    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownJob(f"unknown job {name!r}; known: {', '.join(sorted(BY_NAME))}") from None


def __getattr__(attribute: str) -> JobSpec[Any]:
    """`catalog.<NAME>`: the declaration a domain's jobs module names `<NAME>`."""
    try:
        return _BY_ATTRIBUTE[attribute]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}") from None
