"""How a domain adds its pages and panels to the operator console (the console names none).

A domain's registration names a module (`Domain(console="<package>.console")`, see
`shared.domains`); the console imports every registered one when it starts
(`shared.domains.consoles()`) and reads these attributes of it:

- `NAME: str` (required): a short name, unique among the consoles. The module's templates are
  found as `"<NAME>/<file>"` (e.g. `"billing/invoices.html"`), so two domains never shadow each
  other's templates nor the kernel's.
- `TEMPLATES: pathlib.Path`: its template directory. Its pages extend `"base.html"` (the
  kernel's layout, nav and sign-out) and may use the kernel's filters (`t`, `ago`, `ms`,
  `pretty`).
- `router: fastapi.APIRouter`: its pages, mounted on the console. An endpoint takes the kernel's
  dependencies `Op` (the signed-in operator: auth, and the orgs of `CONSOLE_ORGS` in `op.orgs`,
  empty for every org) and `Con` (the console), and answers with
  `con.render(request, op, "<NAME>/<file>", page="<nav key>", **data)`. A POST takes `Checked`
  (the operator and its form, once the CSRF token is checked) instead of `Op`. Every read is
  scoped to `op.orgs`; what acts for no single tenant is shown to operators of every org only
  (`op.restricted` false). No `from __future__ import annotations` in it: FastAPI reads the
  endpoints' annotations.
- `NAV: tuple[tuple[str, str, str], ...]`: its entries of the nav bar as (page key, label,
  path), shown after the kernel's pages and before Audit; the page key is the `page=` its
  pages render with (the entry is highlighted there).
- `tenant_panel(runtime, orgs) -> (template, context) | None`: a card on the kernel's Tenants
  page, its rows scoped to `orgs` (empty: every org). None: no card.
- `overview_panel(runtime, orgs) -> (template, context) | None`: a card on the Overview,
  recomputed at each refresh (every `CONSOLE_REFRESH_S`): keep it to a few index reads and cache
  what is slow to read (a remote call).

A panel's template renders one whole card (`<section class="card">` with its `<h2>`; `card
wide` spans the grid) from its context plus the page's (`operator`, `csrf`, `now`). A panel that
raises shows as a card with the error; the rest of the page still shows. Everything is optional
but `NAME`: a module may add only panels, or only pages.

The helpers a console module needs are here too: `Op`, `Con`, `Checked`, `Console`, `guard`
(a section that degrades to its error), `present` (which tables this database has: a domain not
migrated shows as absent, not as an error), `rows` (a bounded read as dicts) and `org_scope`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from fastapi import APIRouter

from ..runtime import Runtime
from .actions import Checked
from .app import Console
from .fleet import guard
from .ledgers import org_scope, present, rows
from .pages import Con, Op

__all__ = [
    "Checked",
    "Con",
    "Console",
    "Op",
    "Panel",
    "Plugin",
    "PluginError",
    "guard",
    "load",
    "org_scope",
    "present",
    "rows",
]

#: (template name, context) of a panel.
Panel = tuple[str, dict[str, Any]]
PanelSource = Callable[[Runtime, Sequence[UUID]], Panel | None]
NavEntry = tuple[str, str, str]


class PluginError(Exception):
    """A console module does not follow the protocol above."""


@dataclass(frozen=True)
class Plugin:
    """One domain's console module, checked."""

    name: str
    templates: Path | None = None
    router: APIRouter | None = None
    nav: tuple[NavEntry, ...] = ()
    tenant_panel: PanelSource | None = None
    overview_panel: PanelSource | None = None


def _one(module: Any) -> Plugin:
    what = getattr(module, "__name__", repr(module))
    name = getattr(module, "NAME", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise PluginError(f"console module {what}: NAME must be a short name (an identifier)")
    templates = getattr(module, "TEMPLATES", None)
    if templates is not None and not Path(templates).is_dir():
        raise PluginError(f"console module {what}: TEMPLATES {templates} is not a directory")
    router = getattr(module, "router", None)
    if router is not None and not isinstance(router, APIRouter):
        raise PluginError(f"console module {what}: router is not a fastapi.APIRouter")
    nav = tuple(tuple(entry) for entry in getattr(module, "NAV", ()))
    if not all(len(e) == 3 and all(isinstance(x, str) for x in e) for e in nav):
        raise PluginError(f"console module {what}: NAV entries are (page key, label, path)")
    panels = {}
    for kind in ("tenant_panel", "overview_panel"):
        source = getattr(module, kind, None)
        if source is not None and not callable(source):
            raise PluginError(f"console module {what}: {kind} is not callable")
        panels[kind] = source
    return Plugin(
        name=name,
        templates=None if templates is None else Path(templates),
        router=router,
        nav=nav,  # checked above: triples of str
        **panels,
    )


def load(modules: Iterable[Any]) -> tuple[Plugin, ...]:
    """The console modules, checked, in the order given (the domains' fleet order)."""
    plugins = tuple(_one(m) for m in modules)
    names = [p.name for p in plugins]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PluginError(f"two console modules are named {', '.join(twice)}")
    return plugins
