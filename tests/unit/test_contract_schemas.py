"""Each job's payload schema is pinned: a shipped version may only change compatibly.

The snapshots in tests/contracts/schemas/ are what `fleet contracts export` wrote. When the
current schema of a job version differs from its snapshot:
- an incompatible change fails: add a new version `v` (a new model and an upgrade from the
  previous one) instead of changing a shipped one;
- a compatible change (say, a new optional property) fails too until the snapshot is refreshed
  on purpose: `UPDATE_SCHEMA_SNAPSHOTS=1 pytest tests/unit/test_contract_schemas.py`.
The second half of this file tests the compatibility checker itself on small schemas.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from shared.cli import schemas
from shared.cli.schema_compat import incompatibilities
from shared.jobs import catalog

SNAPSHOTS = Path(__file__).parents[1] / "contracts" / "schemas"
UPDATE = os.environ.get("UPDATE_SCHEMA_SNAPSHOTS") == "1"
CURRENT = schemas.documents(catalog.ALL)
PINNED = schemas.read(SNAPSHOTS)
REFRESH = "UPDATE_SCHEMA_SNAPSHOTS=1 .venv/bin/pytest tests/unit/test_contract_schemas.py"


def _write(name: str) -> None:
    (SNAPSHOTS / name).write_text(schemas.dumps(CURRENT[name]), encoding="utf-8")


@pytest.mark.parametrize("name", sorted(set(CURRENT) | set(PINNED)))
def test_schema_matches_its_snapshot(name: str) -> None:
    if name not in CURRENT:
        pytest.fail(
            f"{name} is pinned but no job declares it any more. Workers must keep accepting every "
            "version that may still be queued; if this one is truly retired, re-export on purpose: "
            "`fleet contracts export tests/contracts/schemas --clean`."
        )
    if name not in PINNED:
        if UPDATE:
            _write(name)
            return
        pytest.fail(f"{name} has no snapshot yet (a new job or version): pin it with `{REFRESH}`.")
    if CURRENT[name] == PINNED[name]:
        return
    if name == schemas.INDEX:
        if UPDATE:
            _write(name)
            return
        pytest.fail(
            f"the contract index changed (a queue or version list): refresh it with `{REFRESH}`."
        )
    problems = incompatibilities(PINNED[name], CURRENT[name])
    if problems:
        pytest.fail(
            f"{name} changed incompatibly:\n  - "
            + "\n  - ".join(problems)
            + "\nA payload version that shipped must keep accepting what it accepted. Add a new "
            "version instead (a model with `v: Literal[n+1] = n+1` appended to the contract's "
            "versions, plus an upgrade from the previous version), or make the change backward compatible."
        )
    if UPDATE:
        _write(name)
        return
    pytest.fail(
        f"{name} changed compatibly (e.g. a new optional property); refresh the snapshot on "
        f"purpose with `{REFRESH}` and commit it."
    )


# -- the compatibility checker -------------------------------------------------------------


def _obj(
    properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
        **extra,
    }


STR = {"type": "string"}
BASE = _obj({"a": STR, "b": {"type": "integer"}}, ("a",))


def _problems(new: dict[str, Any], old: dict[str, Any] = BASE) -> list[str]:
    return incompatibilities(old, new)


def test_identical_schemas_are_compatible() -> None:
    assert _problems(BASE) == []


def test_a_new_optional_property_is_compatible() -> None:
    assert (
        _problems(
            _obj(
                {"a": STR, "b": {"type": "integer"}, "c": {"type": "boolean", "default": False}},
                ("a",),
            )
        )
        == []
    )


def test_descriptions_and_titles_do_not_matter() -> None:
    assert (
        _problems(
            _obj(
                {"a": {**STR, "description": "new words", "title": "A"}, "b": {"type": "integer"}},
                ("a",),
            )
        )
        == []
    )


def test_a_removed_property_is_incompatible() -> None:
    assert _problems(_obj({"a": STR}, ("a",))) == ["$.b: property removed"]


def test_a_new_required_property_is_incompatible() -> None:
    assert _problems(_obj({"a": STR, "b": {"type": "integer"}, "c": STR}, ("a", "c"))) == [
        "$.c: new required property"
    ]


def test_an_optional_property_made_required_is_incompatible() -> None:
    assert _problems(_obj({"a": STR, "b": {"type": "integer"}}, ("a", "b"))) == [
        "$.b: optional property is now required"
    ]


def test_a_required_property_made_optional_is_compatible() -> None:
    assert _problems(_obj({"a": STR, "b": {"type": "integer"}})) == []


def test_a_narrowed_type_is_incompatible_and_a_widened_one_is_not() -> None:
    old = _obj({"x": {"type": "number"}})
    assert _problems(_obj({"x": {"type": "integer"}}), old) == [
        "$.x: type number is no longer accepted"
    ]
    assert _problems(_obj({"x": {"type": "number"}}), _obj({"x": {"type": "integer"}})) == []


def test_a_union_losing_a_branch_is_incompatible() -> None:
    old = _obj({"x": {"anyOf": [STR, {"type": "null"}], "default": None}})
    assert _problems(_obj({"x": STR}), old) == ["$.x: null is no longer accepted"]
    assert _problems(old, _obj({"x": STR})) == []


def test_a_narrowed_enum_is_incompatible_and_a_widened_one_is_not() -> None:
    old = _obj({"f": {"type": "string", "enum": ["CSV", "XLSX"]}})
    assert _problems(_obj({"f": {"type": "string", "enum": ["CSV"]}}), old) == [
        "$.f: enum values ['XLSX'] are no longer accepted"
    ]
    assert _problems(_obj({"f": {"type": "string", "enum": ["CSV", "XLSX", "PDF"]}}), old) == []


def test_a_changed_const_is_incompatible() -> None:
    old = _obj({"v": {"type": "integer", "const": 1}})
    assert _problems(_obj({"v": {"type": "integer", "const": 2}}), old) == [
        "$.v: const changed from 1 to 2"
    ]


@pytest.mark.parametrize(
    ("old", "new", "compatible"),
    [
        ({"type": "string", "maxLength": 100}, {"type": "string", "maxLength": 50}, False),
        ({"type": "string", "maxLength": 100}, {"type": "string", "maxLength": 200}, True),
        ({"type": "string", "minLength": 1}, {"type": "string", "minLength": 2}, False),
        ({"type": "string"}, {"type": "string", "minLength": 1}, False),
        ({"type": "string", "minLength": 1}, {"type": "string"}, True),
        ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1}, False),
        ({"type": "integer", "maximum": 10}, {"type": "integer"}, True),
        (
            {"type": "string", "pattern": "^[a-z]+$"},
            {"type": "string", "pattern": "^[a-z0-9]+$"},
            False,
        ),
        ({"type": "string", "pattern": "^[a-z]+$"}, {"type": "string"}, True),
        ({"type": "string"}, {"type": "string", "format": "email"}, False),
        ({"type": "array", "items": STR}, {"type": "array", "items": {"type": "integer"}}, False),
        (
            {"type": "array", "items": {"type": "integer"}},
            {"type": "array", "items": {"type": "number"}},
            True,
        ),
        ({"type": "string", "default": "en"}, {"type": "string", "default": "fr"}, False),
        ({}, {"type": "string"}, False),
        ({"type": "string"}, {}, True),
    ],
)
def test_constraints_compare_by_what_they_accept(
    old: dict[str, Any], new: dict[str, Any], compatible: bool
) -> None:
    assert (_problems(_obj({"x": new}), _obj({"x": old})) == []) is compatible


def test_changed_additional_properties_is_incompatible() -> None:
    assert _problems(
        _obj({"a": STR, "b": {"type": "integer"}}, ("a",), additionalProperties=True)
    ) == ["$: additionalProperties changed from False to True"]
    open_map = {"type": "object", "additionalProperties": True}
    assert _problems({"type": "object", "additionalProperties": STR}, open_map) == [
        "$: additionalProperties changed from True to {'type': 'string'}"
    ]


def test_references_are_followed_into_nested_models() -> None:
    def with_range(end: dict[str, Any]) -> dict[str, Any]:
        return {
            **_obj({"params": {"$ref": "#/$defs/Params", "description": "how"}}),
            "$defs": {"Params": _obj({"start": {"type": "string", "format": "date"}, "end": end})},
        }

    old = with_range({"type": "string", "format": "date"})
    assert (
        _problems(with_range({"type": "string", "format": "date", "description": "x"}), old) == []
    )
    assert _problems(with_range({"type": "string", "format": "date-time"}), old) == [
        "$.params.end: format changed from 'date' to 'date-time'"
    ]


def test_an_unknown_validation_keyword_that_changes_is_incompatible() -> None:
    old = _obj({"x": {"type": "object"}})
    assert _problems(_obj({"x": {"type": "object", "propertyNames": {"pattern": "^a"}}}), old) == [
        "$.x: keyword 'propertyNames' changed (not known to be compatible)"
    ]


def test_the_pinned_schemas_are_compatible_with_themselves() -> None:
    for name, document in PINNED.items():
        if name != schemas.INDEX:
            assert incompatibilities(document, document) == [], name


def test_a_real_contract_change_is_caught() -> None:
    """The email:send v1 snapshot against a variant without `reply_to` and a stricter key."""
    pinned = PINNED["email.send.v1.schema.json"]
    changed = {
        **pinned,
        "properties": {k: v for k, v in pinned["properties"].items() if k != "reply_to"},
    }
    changed["properties"]["template_key"] = {
        **changed["properties"]["template_key"],
        "maxLength": 10,
    }
    assert incompatibilities(pinned, changed) == [
        "$.reply_to: property removed",
        "$.template_key: maxLength lowered to 10 (was 100)",
    ]
