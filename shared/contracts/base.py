"""The payload base class and the versioned contract of one job.

A payload is a frozen pydantic model that forbids unknown fields and carries a literal version
`v` and the tenant `org_id`. A `Contract` lists every version a worker still accepts and the
upgrade functions between consecutive versions, so a handler only ever sees the newest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, ClassVar, Generic, TypeVar
from uuid import UUID

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, NoDefault
from pydantic_core import core_schema as cs

from ..errors import InvalidPayload, PayloadError

#: The org of system jobs that act for no single tenant (DESIGN §2).
SYSTEM_ORG = UUID(int=0)

#: Characters Postgres cannot store in `text` or `jsonb`: NUL, and UTF-16 surrogates (a lone
#: one is not Unicode text; Python lets it into a `str`, UTF-8 and Postgres do not).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable(value: Any) -> list[tuple[Any, ...]]:
    """Paths of the strings (values or keys) in `value` that Postgres cannot store.

    Such a payload used to pass the contract and then have its run row refused: the run writer
    retried it forever and every later send of the process failed. The contract refuses it.
    """
    if not _may_hold_unstorable(value):
        return []
    return [path for path, _ in _unstorable(value, ())]


def _may_hold_unstorable(value: Any) -> bool:
    """False when no string in `value` can hold what Postgres cannot store: one orjson pass
    (~1 µs for a small payload, e.g. 2 µs for a few fields of text) instead of a walk in Python of every
    value (8 and 48 µs), on every send and every delivery. orjson writes a NUL as `\\u0000`
    and refuses a lone surrogate (and whatever is not JSON); a text that merely holds the six
    characters `\\u0000` is looked at closely too."""
    try:
        return b"\\u0000" in orjson.dumps(value)
    except TypeError:
        return True


def _unstorable(value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    found: list[tuple[tuple[Any, ...], str]] = []
    if isinstance(value, str):
        if _UNSTORABLE.search(value):
            found.append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _UNSTORABLE.search(key):
                found.append(((*path, key), key))
            found.extend(_unstorable(item, (*path, key)))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found.extend(_unstorable(item, (*path, index)))
    return found


def _unstorable_errors(data: Any) -> list[dict[str, Any]]:
    if not _may_hold_unstorable(data):
        return []
    return [
        {
            "loc": tuple(_printable(part) for part in path),
            "msg": (
                "contains a NUL character (\\u0000)"
                if "\x00" in text
                else "contains a lone surrogate"
            )
            + ", which Postgres cannot store",
            "type": "unstorable_string",
        }
        for path, text in _unstorable(data, ())
    ]


def _printable(part: Any) -> Any:
    """A path element fit for an error message: a lone surrogate in a key written `\\udc80`."""
    if isinstance(part, str):
        return part.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    return part


def _no_crlf(value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError("must not contain CR or LF")
    return value


class DefaultPattern:
    """Exports a JSON Schema `pattern` for a constrained string unless the field sets its own,
    so producers in other languages can check the rule before sending."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __get_pydantic_json_schema__(
        self, core_schema: Any, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.setdefault("pattern", self.pattern)
        return schema


#: A single-line string: header injection (CR/LF) is rejected by the contract.
SingleLine = Annotated[str, AfterValidator(_no_crlf), DefaultPattern(r"^[^\r\n]*$")]


class Payload(BaseModel):
    """Base of every job payload. Subclasses set `v: Literal[n]`."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)

    v: int
    org_id: UUID

    #: Fields that identify the work, hashed into the job id; None means every field but `v`.
    stable_fields: ClassVar[tuple[str, ...] | None] = None

    def wire(self) -> dict[str, Any]:
        """The JSON-ready form carried by the message."""
        return self.model_dump(mode="json")

    def stable_part(self, wire: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the job id hashes; `wire`: this payload's `wire()`, when the caller has it."""
        data = {k: v for k, v in (self.wire() if wire is None else wire).items() if k != "v"}
        if self.stable_fields is not None:
            data = {k: data[k] for k in self.stable_fields}
        return data


P = TypeVar("P", bound=Payload)
Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Contract(Generic[P]):
    """Every accepted version of one job's payload, oldest first, and the upgrades between."""

    job_name: str
    versions: tuple[type[Payload], ...]
    #: upgrades[n] turns a valid version-n dict into a version-(n+1) dict.
    upgrades: Mapping[int, Upgrade] = field(default_factory=dict)

    def __post_init__(self) -> None:
        numbers = [self.version_of(model) for model in self.versions]
        if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
            raise ValueError(f"{self.job_name}: versions must be unique and ascending")
        for n in numbers[:-1]:
            if n not in self.upgrades:
                raise ValueError(f"{self.job_name}: no upgrade from v{n}")

    @staticmethod
    def version_of(model: type[Payload]) -> int:
        default = model.model_fields["v"].default
        if not isinstance(default, int):
            raise TypeError(f"{model.__name__} must declare `v: Literal[n] = n`")
        return default

    @property
    def latest(self) -> type[P]:
        return self.versions[-1]  # type: ignore[return-value]

    @cached_property
    def latest_version(self) -> int:
        return self.version_of(self.latest)

    @cached_property
    def by_version(self) -> dict[int, type[Payload]]:
        return {self.version_of(m): m for m in self.versions}

    def build(self, payload: Payload | Mapping[str, Any]) -> P:
        """Producer side: validate and upgrade; errors raise `PayloadError` with field paths."""
        return self.build_wire(payload)[0]

    def build_wire(self, payload: Payload | Mapping[str, Any]) -> tuple[P, dict[str, Any]]:
        """`build`, and the payload's `wire()` (computed once for the checks, the job id and
        the message)."""
        if isinstance(payload, Payload):
            if type(payload) not in self.versions:
                raise PayloadError(
                    self.job_name,
                    [{"loc": (), "msg": f"{type(payload).__name__} is not a payload of this job"}],
                )
            payload = payload.wire()
        data = dict(payload)
        data.setdefault("v", self.latest_version)
        # The input too: a dict key holding a lone surrogate comes out of validation altered
        # (`U+FFFD`), where the check of the wire alone would pass it.
        refused = _unstorable_errors(data)
        if refused:
            raise PayloadError(self.job_name, refused)
        try:
            model = self._upgrade(data)
        except ValidationError as exc:
            raise PayloadError(self.job_name, _errors(exc)) from None
        except _UnknownVersion as exc:
            raise PayloadError(self.job_name, [{"loc": ("v",), "msg": str(exc)}]) from None
        wire = model.wire()
        refused = _unstorable_errors(wire)
        if refused:
            raise PayloadError(self.job_name, refused)
        return model, wire

    def parse(self, data: Any) -> P:
        """Worker side: any invalid or unknown payload is a permanent `InvalidPayload`."""
        return self.parse_wire(data)[0]

    def parse_wire(self, data: Any) -> tuple[P, dict[str, Any]]:
        """`parse`, and the payload's `wire()` (for its job id)."""
        if not isinstance(data, Mapping):
            raise InvalidPayload(
                f"{self.job_name}: payload must be an object, got {type(data).__name__}"
            )
        refused = _unstorable_errors(data)
        if refused:
            details = "; ".join(f"{_loc(e)}: {e['msg']}" for e in refused)
            raise InvalidPayload(f"{self.job_name}: {details}")
        try:
            model = self._upgrade(dict(data))
        except ValidationError as exc:
            details = "; ".join(f"{_loc(e)}: {e['msg']}" for e in _errors(exc))
            raise InvalidPayload(f"{self.job_name}: {details}") from None
        except _UnknownVersion as exc:
            raise InvalidPayload(f"{self.job_name}: {exc}") from None
        wire = model.wire()
        refused = _unstorable_errors(wire)
        if refused:
            details = "; ".join(f"{_loc(e)}: {e['msg']}" for e in refused)
            raise InvalidPayload(f"{self.job_name}: {details}")
        return model, wire

    def _upgrade(self, data: dict[str, Any]) -> P:
        models = self.by_version
        version = data.get("v")
        if not isinstance(version, int) or isinstance(version, bool) or version not in models:
            raise _UnknownVersion(f"unknown version {version!r}; accepted: {sorted(models)}")
        model = models[version].model_validate(data)
        latest = self.latest_version
        while version < latest:
            data = self.upgrades[version](model.wire())
            version += 1
            model = models[version].model_validate(data)
        return model  # type: ignore[return-value]

    def json_schemas(self) -> dict[int, dict[str, Any]]:
        return {n: json_schema(m) for n, m in self.by_version.items()}


class _FilledDefaults(GenerateJsonSchema):
    """A field's `default_factory` is written as its `default` too (pydantic leaves it out):
    a producer in another language fills every default that validation fills here, and the job
    id hashes the filled form (docs/wire-protocol.md §1)."""

    def get_default_value(self, schema: cs.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        return schema.get("default", NoDefault)


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of a payload version, every default declared (`fleet contracts export`)."""
    return model.model_json_schema(mode="validation", schema_generator=_FilledDefaults)


class _UnknownVersion(Exception):
    pass


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": tuple(e["loc"]), "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_input=False)
    ]


def _loc(error: Mapping[str, Any]) -> str:
    return ".".join(str(p) for p in error.get("loc", ())) or "<payload>"
