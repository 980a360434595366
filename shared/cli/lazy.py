"""Domain sub-commands loaded on use: `fleet <domain> ...` imports that domain's CLI only then.

The kernel names no domain (DESIGN §1): each registers its commands (shared/domains.py), and a
domain's CLI may pull in heavy dependencies. So `fleet` registers each declared command whose
module is present on disk (found without importing it) as a thin forwarding command; running it imports the module
and hands the remaining arguments to the real Typer app. A domain whose module fails to import
says why instead of vanishing.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from shared.errors import FleetError


class DomainUnavailable(FleetError):
    """A domain's commands cannot be loaded."""

    code = "UNAVAILABLE"


def module_present(module: str) -> bool:
    """Whether `module` exists, found on disk without importing it or its parent packages."""
    if module in sys.modules:
        return True
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)  # a top-level lookup imports nothing
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if not rest:
        return True
    locations = list(spec.submodule_search_locations or ())
    for i, part in enumerate(rest):
        last = i == len(rest) - 1
        packages = [
            Path(loc, part) for loc in locations if Path(loc, part, "__init__.py").is_file()
        ]
        if last and (packages or any(Path(loc, f"{part}.py").is_file() for loc in locations)):
            return True
        if not packages:
            return False
        locations = [str(packages[0])]
    return False


def load(target: str) -> Any:
    """Import `package.module:attribute`."""
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


def to_command(obj: Any) -> Any:
    """A click command from a Typer app, a click command, or a plain function."""
    if isinstance(obj, typer.Typer):
        if obj.registered_commands or obj.registered_groups:
            # A group even with one command: Typer collapses an app of one command into that
            # command, so a domain's command line would change with its number of commands.
            return typer.main.get_group(obj)
        return typer.main.get_command(obj)
    if hasattr(obj, "main") and hasattr(obj, "make_context"):
        return obj
    if callable(obj):
        single = typer.Typer()
        single.command()(obj)
        return typer.main.get_command(single)
    raise TypeError(f"{obj!r} is neither a Typer app, a click command nor a function")


def forwarder(name: str, target: str) -> Callable[[typer.Context], None]:
    """The body of `fleet <name>`: load the real app and run it on the remaining arguments."""

    def forward(ctx: typer.Context) -> None:
        try:
            command = to_command(load(target))
        except Exception as exc:
            raise DomainUnavailable(
                f"fleet {name} is unavailable: cannot load {target}: {type(exc).__name__}: {exc}"
            ) from exc
        prog = f"{ctx.find_root().info_name or 'fleet'} {name}"
        command.main(args=list(ctx.args), prog_name=prog, standalone_mode=True)

    forward.__name__ = f"forward_{name}"
    return forward


def register(
    app: typer.Typer,
    commands: dict[str, tuple[str, str]],
    panels: dict[str, str | None] | None = None,
) -> list[str]:
    """Add a forwarding command for every `name: (target, help)` present on disk; their names.
    `panels`: the `fleet --help` panel of each (None: with the fleet's own commands)."""
    added = []
    for name, (target, help_text) in commands.items():
        if not module_present(target.partition(":")[0]):
            continue  # not installed: silently absent
        app.command(
            name,
            help=help_text,
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            add_help_option=False,
            rich_help_panel=(panels or {}).get(name),
        )(forwarder(name, target))
        added.append(name)
    return added


def register_domains(app: typer.Typer) -> list[str]:
    """The commands every registered domain declares (shared/domains.py)."""
    from shared.domains import commands

    found = commands()
    return register(
        app, {c.name: (c.target, c.help) for c in found}, {c.name: c.panel for c in found}
    )
