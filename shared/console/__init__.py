"""The operator console (`fleet web`): the fleet in a browser. Needs the `api` extra."""

from __future__ import annotations

from .settings import ConsoleSettings, UnsafeBind, check_bind

__all__ = ["ConsoleSettings", "UnsafeBind", "check_bind", "create_app"]


def create_app(*args: object, **kwargs: object) -> object:
    """`shared.console.app.create_app` (imported on use: FastAPI is an extra)."""
    from .app import create_app as build

    return build(*args, **kwargs)  # type: ignore[arg-type]
