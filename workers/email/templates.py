"""Email templates: Jinja2, one subject, plain-text and HTML file per template and language.

    templates/<lang>/<key>.subject.txt   one line once rendered
    templates/<lang>/<key>.txt           the text/plain part
    templates/<lang>/<key>.html          the text/html part (extends _layout.html)

HTML is autoescaped, text is not. Variables are strict: a missing one is a permanent failure
that names it (retrying cannot invent it), unlike Jinja's default of rendering an empty string.
A rendered subject holding CR or LF (a variable that smuggles a header) is refused too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from shared.errors import PermanentError

TEMPLATE_DIR = Path(__file__).with_name("templates")
LANGS = ("fr", "en")


class TemplateError(PermanentError):
    """The template cannot be rendered."""

    code = "TEMPLATE_ERROR"


class UnknownTemplate(TemplateError):
    """No such template in that language."""

    code = "UNKNOWN_TEMPLATE"


class MissingVariable(TemplateError):
    """A variable the template needs was not given."""

    code = "TEMPLATE_UNDEFINED"


class HeaderInjection(PermanentError):
    """A header value holds CR or LF."""

    code = "HEADER_INJECTION"


@dataclass(frozen=True)
class Rendered:
    subject: str
    text: str
    html: str


class Templates:
    def __init__(self, directory: Path = TEMPLATE_DIR, *, product_name: str = "jobfleet") -> None:
        self.directory = directory
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(directory)),
            autoescape=jinja2.select_autoescape(
                enabled_extensions=("html",), default_for_string=False
            ),
            undefined=jinja2.StrictUndefined,
            auto_reload=False,
        )
        self.env.globals["PRODUCT"] = product_name

    def keys(self) -> list[str]:
        """Template keys available in every language."""
        per_lang = [
            {
                p.name.removesuffix(".subject.txt")
                for p in (self.directory / lang).glob("*.subject.txt")
            }
            for lang in LANGS
        ]
        return sorted(set.intersection(*per_lang))

    def render(self, key: str, lang: str, variables: Mapping[str, Any]) -> Rendered:
        if lang not in LANGS or "/" in key or key.startswith((".", "_")):
            raise UnknownTemplate(f"no template {key!r} in {lang!r}")
        context = {**variables, "LANG": lang}
        subject = self._render(key, lang, "subject.txt", context).strip()
        if "\r" in subject or "\n" in subject:
            raise HeaderInjection(f"template {key}/{lang}: a variable puts CR/LF into the subject")
        if not subject:
            raise TemplateError(f"template {key}/{lang}: the subject renders empty")
        text = self._render(key, lang, "txt", context)
        html = self._render(key, lang, "html", {**context, "SUBJECT": subject})
        return Rendered(subject=subject, text=text, html=html)

    def _render(self, key: str, lang: str, part: str, context: Mapping[str, Any]) -> str:
        name = f"{lang}/{key}.{part}"
        try:
            template = self.env.get_template(name)
        except jinja2.TemplateNotFound:
            raise UnknownTemplate(f"no template {key!r} in {lang!r} (missing {name})") from None
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template {name} line {exc.lineno}: {exc.message}") from None
        try:
            return template.render(context)
        except jinja2.UndefinedError as exc:
            raise MissingVariable(f"template {key}/{lang}: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template {name}: {exc}") from None
