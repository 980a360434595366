"""Is a new JSON Schema of a payload backward compatible with the one that shipped?

Compatible means: every payload valid under the old schema is still valid under the new one, so
messages already queued and producers not yet upgraded keep working. Adding an optional
property, dropping a constraint, widening a type or an enum are compatible; removing a
property, adding a required one, making one required, narrowing a type, an enum or a bound,
changing a pattern, a format, a const, a default or `additionalProperties` are not: they need
a new payload version `v` (a new model plus an upgrade from the previous one).

Conservative by design: a validation keyword this checker does not know counts as
incompatible when it changes; annotations (title, description, examples) never matter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Schema = Mapping[str, Any] | bool

ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
        "$id",
    }
)
_STRUCTURAL = frozenset({"$ref", "$defs", "definitions", "anyOf", "oneOf", "allOf"})
_HANDLED = frozenset(
    {
        "type", "const", "enum", "default",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minLength", "maxLength", "pattern", "format",
        "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
        "properties", "required", "additionalProperties", "minProperties", "maxProperties",
    }
)  # fmt: skip
_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_MAX_DEPTH = 32


def incompatibilities(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Why a payload valid under `old` may be rejected by `new`; empty when compatible."""
    checker = _Checker(old, new)
    checker.check(old, new, "$")
    return checker.problems


class _Checker:
    def __init__(self, old_root: Mapping[str, Any], new_root: Mapping[str, Any]) -> None:
        self.old_root = old_root
        self.new_root = new_root
        self.problems: list[str] = []
        self._depth = 0

    def check(self, old: Schema, new: Schema, path: str) -> None:
        old_branches = _branches(old, self.old_root)
        new_branches = _branches(new, self.new_root)
        if len(old_branches) == 1 and len(new_branches) == 1:
            self._compare(old_branches[0], new_branches[0], path)
            return
        for branch in old_branches:
            if not any(not self._sub(branch, candidate, path) for candidate in new_branches):
                self.problems.append(f"{path}: {_describe(branch)} is no longer accepted")
        self._defaults(_resolve(old, self.old_root), _resolve(new, self.new_root), path)

    def _sub(self, old: Schema, new: Schema, path: str) -> list[str]:
        """The problems of one old/new pair, without recording them."""
        saved, self.problems = self.problems, []
        try:
            self._compare(old, new, path)
            return self.problems
        finally:
            self.problems = saved

    def _compare(self, old: Schema, new: Schema, path: str) -> None:
        if self._depth >= _MAX_DEPTH:  # a recursive model: its first levels were compared
            return
        self._depth += 1
        try:
            self._compare_once(old, new, path)
        finally:
            self._depth -= 1

    def _compare_once(self, old: Schema, new: Schema, path: str) -> None:
        if new is True or new == {}:
            return
        if new is False:
            if old is not False:
                self.problems.append(f"{path}: nothing is accepted any more")
            return
        if old is False:
            return
        assert isinstance(old, Mapping) and isinstance(new, Mapping)
        self._types(old, new, path)
        self._values(old, new, path)
        self._bounds(old, new, path)
        self._strings(old, new, path)
        if "items" in new or "items" in old:
            self.check(old.get("items", True), new.get("items", True), f"{path}[]")
        if "prefixItems" in new and new.get("prefixItems") != old.get("prefixItems"):
            self.problems.append(f"{path}: prefixItems changed")
        if new.get("uniqueItems") and not old.get("uniqueItems"):
            self.problems.append(f"{path}: items must now be unique")
        if _is_object(old) or _is_object(new):
            self._objects(old, new, path)
        self._defaults(old, new, path)
        for keyword in sorted(set(new) - _HANDLED - ANNOTATIONS - _STRUCTURAL):
            if new[keyword] != old.get(keyword):
                self.problems.append(
                    f"{path}: keyword {keyword!r} changed (not known to be compatible)"
                )

    def _types(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        if "type" not in new:
            return
        new_types = _types(new)
        if "type" not in old:
            self.problems.append(f"{path}: now restricted to type {'|'.join(sorted(new_types))}")
            return
        lost = {
            t
            for t in _types(old)
            if not (t in new_types or (t == "integer" and "number" in new_types))
        }
        if lost:
            self.problems.append(f"{path}: type {'|'.join(sorted(lost))} is no longer accepted")

    def _values(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        if "const" in new and ("const" not in old or old["const"] != new["const"]):
            before = repr(old["const"]) if "const" in old else "any value"
            self.problems.append(f"{path}: const changed from {before} to {new['const']!r}")
        if "enum" in new:
            if "enum" in old:
                values = list(old["enum"])
            elif "const" in old:
                values = [old["const"]]
            else:
                self.problems.append(f"{path}: now restricted to the values {new['enum']!r}")
                return
            removed = [v for v in values if v not in new["enum"]]
            if removed:
                self.problems.append(f"{path}: enum values {removed!r} are no longer accepted")

    def _bounds(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        for keyword in _LOWER_BOUNDS:
            if keyword in new and (keyword not in old or new[keyword] > old[keyword]):
                self.problems.append(
                    f"{path}: {keyword} raised to {new[keyword]!r} (was {old.get(keyword)!r})"
                )
        for keyword in _UPPER_BOUNDS:
            if keyword in new and (keyword not in old or new[keyword] < old[keyword]):
                self.problems.append(
                    f"{path}: {keyword} lowered to {new[keyword]!r} (was {old.get(keyword)!r})"
                )
        if "multipleOf" in new and new["multipleOf"] != old.get("multipleOf"):
            self.problems.append(f"{path}: multipleOf changed to {new['multipleOf']!r}")

    def _strings(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        for keyword in ("pattern", "format"):
            if keyword in new and new[keyword] != old.get(keyword):
                self.problems.append(
                    f"{path}: {keyword} changed from {old.get(keyword)!r} to {new[keyword]!r}"
                )

    def _objects(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
        old_props: Mapping[str, Any] = old.get("properties", {})
        new_props: Mapping[str, Any] = new.get("properties", {})
        old_required = set(old.get("required", ()))
        new_required = set(new.get("required", ()))
        for name in old_props:
            if name not in new_props:
                self.problems.append(f"{path}.{name}: property removed")
            else:
                self.check(old_props[name], new_props[name], f"{path}.{name}")
        for name in sorted(new_required - old_required):
            if name in old_props:
                self.problems.append(f"{path}.{name}: optional property is now required")
            else:
                self.problems.append(f"{path}.{name}: new required property")
        old_extra = old.get("additionalProperties", True)
        new_extra = new.get("additionalProperties", True)
        if isinstance(old_extra, Mapping) and isinstance(new_extra, Mapping):
            self.check(old_extra, new_extra, f"{path}.*")
        elif old_extra != new_extra:
            self.problems.append(
                f"{path}: additionalProperties changed from {old_extra!r} to {new_extra!r}"
            )

    def _defaults(self, old: Schema, new: Schema, path: str) -> None:
        if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
            return
        if "default" in old and "default" in new and old["default"] != new["default"]:
            self.problems.append(
                f"{path}: default changed from {old['default']!r} to {new['default']!r} "
                "(payloads that omit it change meaning)"
            )


def _types(schema: Mapping[str, Any]) -> set[str]:
    value = schema.get("type")
    return set(value) if isinstance(value, list) else {str(value)}


def _is_object(schema: Schema) -> bool:
    return isinstance(schema, Mapping) and (
        schema.get("type") == "object" or "properties" in schema
    )


def _resolve(schema: Schema, root: Mapping[str, Any]) -> Schema:
    """Follow `$ref` (local JSON pointers) and merge single-schema `allOf`; siblings win."""
    for _ in range(64):
        if isinstance(schema, bool):
            return schema
        if "$ref" in schema:
            target = _pointer(root, schema["$ref"])
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = target if not siblings else _merge(target, siblings)
            continue
        if "allOf" in schema:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                resolved = _resolve(part, root)
                if isinstance(resolved, Mapping):
                    merged = {**resolved, **merged}
            schema = merged
            continue
        return schema
    raise ValueError("$ref chain too deep")


def _pointer(root: Mapping[str, Any], ref: str) -> Schema:
    if not ref.startswith("#"):
        raise ValueError(f"only local $ref are supported, got {ref!r}")
    node: Any = root
    for part in ref.lstrip("#").strip("/").split("/"):
        if part:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node  # type: ignore[no-any-return]


def _merge(schema: Schema, extra: Mapping[str, Any]) -> Schema:
    if isinstance(schema, bool):
        return schema
    return {**schema, **extra}


def _branches(schema: Schema, root: Mapping[str, Any]) -> list[Schema]:
    """The alternatives a value may match: anyOf/oneOf members and the types of a type list."""
    schema = _resolve(schema, root)
    if isinstance(schema, bool):
        return [schema]
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema:
            shared = {
                k: v
                for k, v in schema.items()
                if k not in ANNOTATIONS and k not in (keyword, "default")
            }
            return [
                _merge(branch, shared)
                for member in schema[keyword]
                for branch in _branches(member, root)
            ]
    kinds = schema.get("type")
    if isinstance(kinds, list) and len(kinds) > 1:
        return [{**schema, "type": kind} for kind in kinds]
    return [schema]


def _describe(schema: Schema) -> str:
    if isinstance(schema, bool):
        return "anything" if schema else "nothing"
    for keyword in ("const", "enum"):
        if keyword in schema:
            return f"{keyword} {schema[keyword]!r}"
    kind = schema.get("type", "any value")
    title = schema.get("title")
    return f"{kind} ({title})" if title and kind == "object" else str(kind)
