"""A JSON-schema subset for structured output: check a schema once, validate model values.

The child's ``final_result`` arguments come from a model, so they are validated here before the
parent ever sees them. The schema comes from the program or the config; :func:`check_schema`
refuses anything this validator would not enforce (an unknown keyword, a remote ``$ref``), so a
schema never *looks* stricter than it is.

Supported keywords: ``type``, ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties``, ``minProperties``, ``maxProperties``, ``items``, ``prefixItems``,
``minItems``, ``maxItems``, ``uniqueItems``, ``minLength``, ``maxLength``, ``pattern``,
``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``, ``anyOf``,
``oneOf``, ``allOf``, ``not``, and local ``$ref`` (``#/$defs/...``, ``#/definitions/...``, ``#``).
Annotations (``title``, ``description``, ``default``, ``examples``, ``format`` ...) are accepted
and not enforced, as JSON Schema itself specifies for them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._errors import SubagentSchemaError

__all__ = ["check_schema", "validate"]

_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$defs",
        "definitions",
        "title",
        "description",
        "default",
        "examples",
        "format",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
    }
)
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "not", "additionalProperties")
_COUNTS = (
    "minProperties",
    "maxProperties",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
)
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_SUPPORTED = (
    frozenset({"type", "enum", "const", "required", "uniqueItems", "pattern", "multipleOf", "$ref"})
    | set(_SCHEMA_MAPS)
    | set(_SCHEMA_LISTS)
    | set(_SCHEMA_ONE)
    | set(_COUNTS)
    | set(_BOUNDS)
    | _ANNOTATIONS
)
#: How deep validation follows nested schemas and ``$ref`` s before it gives up.
_MAX_DEPTH = 64
#: How many problems a report lists.
_MAX_PROBLEMS = 10


def check_schema(schema: object, *, path: str = "$") -> None:
    """Raise :class:`SubagentSchemaError` unless ``schema`` is a supported JSON schema.

    Raises:
        SubagentSchemaError: naming the place and what is wrong there.
    """
    _check(schema, schema, path)


def _check(schema: object, root: object, path: str) -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise SubagentSchemaError(
            f"{path}: a schema must be an object or a boolean, got {type(schema).__name__}"
        )
    unknown = sorted(str(key) for key in schema if key not in _SUPPORTED)
    if unknown:
        raise SubagentSchemaError(
            f"{path}: unsupported JSON schema keyword(s) {', '.join(unknown)}; the output "
            f"validator enforces only: {', '.join(sorted(_SUPPORTED - _ANNOTATIONS))}"
        )
    if "type" in schema:
        kinds = schema["type"]
        names = kinds if isinstance(kinds, list) else [kinds]
        if not names or any(not isinstance(n, str) or n not in _TYPES for n in names):
            raise SubagentSchemaError(
                f"{path}.type: got {kinds!r}; expected one of {', '.join(sorted(_TYPES))} "
                "or a non-empty list of them"
            )
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        raise SubagentSchemaError(f"{path}.enum: expected a non-empty list of values")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SubagentSchemaError(f"{path}.required: expected a list of property names")
    for key in _COUNTS:
        if key in schema and not _is_count(schema[key]):
            raise SubagentSchemaError(f"{path}.{key}: expected a non-negative integer")
    for key in (*_BOUNDS, "multipleOf"):
        if key in schema and not _is_number(schema[key]):
            raise SubagentSchemaError(f"{path}.{key}: expected a number")
    if "multipleOf" in schema and schema["multipleOf"] <= 0:
        raise SubagentSchemaError(f"{path}.multipleOf: expected a number greater than 0")
    if "uniqueItems" in schema and not isinstance(schema["uniqueItems"], bool):
        raise SubagentSchemaError(f"{path}.uniqueItems: expected true or false")
    if "pattern" in schema:
        pattern = schema["pattern"]
        if not isinstance(pattern, str):
            raise SubagentSchemaError(f"{path}.pattern: expected a regular expression string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SubagentSchemaError(
                f"{path}.pattern: invalid regular expression: {exc}"
            ) from None
    if "$ref" in schema:
        _resolve(schema["$ref"], root, f"{path}.$ref")
    for key in _SCHEMA_MAPS:
        if key in schema:
            members = schema[key]
            if not isinstance(members, Mapping):
                raise SubagentSchemaError(f"{path}.{key}: expected an object of schemas")
            for name, member in members.items():
                _check(member, root, f"{path}.{key}.{name}")
    for key in _SCHEMA_LISTS:
        if key in schema:
            members = schema[key]
            if not isinstance(members, list) or not members:
                raise SubagentSchemaError(f"{path}.{key}: expected a non-empty list of schemas")
            for index, member in enumerate(members):
                _check(member, root, f"{path}.{key}[{index}]")
    for key in _SCHEMA_ONE:
        if key in schema:
            _check(schema[key], root, f"{path}.{key}")


def _resolve(ref: object, root: object, where: str) -> object:
    if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
        raise SubagentSchemaError(
            f"{where}: got {ref!r}; only local references ('#', '#/$defs/Name') are supported"
        )
    node = root
    for raw in ref[2:].split("/") if ref != "#" else ():
        part = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise SubagentSchemaError(f"{where}: {ref!r} points at nothing in the schema")
        node = node[part]
    return node


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# --- validation -------------------------------------------------------------------------------


def validate(value: object, schema: Mapping[str, Any] | bool) -> list[str]:
    """The problems of ``value`` against ``schema`` (checked with :func:`check_schema`), each
    ``"<path>: <what is wrong>"``; empty when it is valid. At most 10 are listed."""
    problems: list[str] = []
    _Validator(schema, problems).run(value, schema, "$", 0)
    return problems[:_MAX_PROBLEMS]


class _Validator:
    __slots__ = ("problems", "root")

    def __init__(self, root: object, problems: list[str]) -> None:
        self.root = root
        self.problems = problems

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def ok(self, value: object, schema: object, path: str, depth: int) -> bool:
        """Whether ``value`` is valid against ``schema``, without reporting."""
        probe = _Validator(self.root, [])
        probe.run(value, schema, path, depth)
        return not probe.problems

    def run(self, value: object, schema: object, path: str, depth: int) -> None:
        if len(self.problems) >= _MAX_PROBLEMS:
            return
        if depth > _MAX_DEPTH:
            self.fail(path, "the schema nests (or refers to itself) too deeply to check")
            return
        if schema is True:
            return
        if schema is False or not isinstance(schema, Mapping):
            self.fail(path, "no value is allowed here")
            return
        if "$ref" in schema:
            self.run(value, _resolve(schema["$ref"], self.root, path), path, depth + 1)
        if "type" in schema and not self.check_type(value, schema["type"], path):
            return
        if "enum" in schema and not any(_json_equal(value, o) for o in schema["enum"]):
            options = ", ".join(_show(o) for o in schema["enum"][:10])
            self.fail(path, f"expected one of {options}, got {_show(value)}")
        if "const" in schema and not _json_equal(value, schema["const"]):
            self.fail(path, f"expected {_show(schema['const'])}, got {_show(value)}")
        for check in (self.combinators, self.objects, self.arrays, self.strings, self.numbers):
            check(value, schema, path, depth)

    def check_type(self, value: object, kinds: object, path: str) -> bool:
        names = kinds if isinstance(kinds, list) else [kinds]
        if any(_has_type(value, str(name)) for name in names):
            return True
        self.fail(path, f"expected {' or '.join(map(str, names))}, got {_show(value)}")
        return False

    def combinators(self, value: object, schema: Mapping[str, Any], path: str, depth: int) -> None:
        for member in schema.get("allOf", ()):
            self.run(value, member, path, depth + 1)
        if "anyOf" in schema and not any(
            self.ok(value, m, path, depth + 1) for m in schema["anyOf"]
        ):
            self.fail(path, f"{_show(value)} matches none of the allowed schemas (anyOf)")
        if "oneOf" in schema:
            matched = sum(self.ok(value, m, path, depth + 1) for m in schema["oneOf"])
            if matched != 1:
                self.fail(
                    path, f"{_show(value)} matches {matched} of the oneOf schemas; expected one"
                )
        if "not" in schema and self.ok(value, schema["not"], path, depth + 1):
            self.fail(path, f"{_show(value)} matches a schema it must not match (not)")

    def objects(self, value: object, schema: Mapping[str, Any], path: str, depth: int) -> None:
        if not isinstance(value, dict):
            return
        properties: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                self.fail(path, f"required property {name!r} is missing")
        for name, member in value.items():
            where = _member_path(path, name)
            if name in properties:
                self.run(member, properties[name], where, depth + 1)
            elif "additionalProperties" in schema:
                extra = schema["additionalProperties"]
                if extra is False:
                    allowed = ", ".join(sorted(properties)) or "none"
                    self.fail(path, f"unexpected property {name!r} (allowed: {allowed})")
                else:
                    self.run(member, extra, where, depth + 1)
        self.count(len(value), schema, "Properties", "properties", path)

    def arrays(self, value: object, schema: Mapping[str, Any], path: str, depth: int) -> None:
        if not isinstance(value, list):
            return
        prefix: Sequence[Any] = schema.get("prefixItems", ())
        for index, item in enumerate(value):
            if index < len(prefix):
                self.run(item, prefix[index], f"{path}[{index}]", depth + 1)
            elif "items" in schema:
                self.run(item, schema["items"], f"{path}[{index}]", depth + 1)
        self.count(len(value), schema, "Items", "items", path)
        if schema.get("uniqueItems") is True:
            for index, item in enumerate(value):
                if any(_json_equal(item, earlier) for earlier in value[:index]):
                    self.fail(f"{path}[{index}]", "repeats an earlier item (uniqueItems)")
                    break

    def strings(self, value: object, schema: Mapping[str, Any], path: str, depth: int) -> None:
        if not isinstance(value, str):
            return
        self.count(len(value), schema, "Length", "characters", path)
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and re.search(pattern, value) is None:
            self.fail(path, f"{_show(value)} does not match the pattern {pattern!r}")

    def numbers(self, value: object, schema: Mapping[str, Any], path: str, depth: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return
        tests: tuple[tuple[str, Callable[[float, float], bool], str], ...] = (
            ("minimum", lambda v, b: v >= b, "at least"),
            ("maximum", lambda v, b: v <= b, "at most"),
            ("exclusiveMinimum", lambda v, b: v > b, "greater than"),
            ("exclusiveMaximum", lambda v, b: v < b, "less than"),
        )
        for key, holds, words in tests:
            if key in schema and not holds(value, schema[key]):
                self.fail(path, f"expected a number {words} {schema[key]}, got {_show(value)}")
        step = schema.get("multipleOf")
        if step is not None:
            quotient = value / step
            if not math.isfinite(quotient) or abs(quotient - round(quotient)) > 1e-9:
                self.fail(path, f"expected a multiple of {step}, got {_show(value)}")

    def count(
        self, size: int, schema: Mapping[str, Any], suffix: str, unit: str, path: str
    ) -> None:
        low, high = schema.get(f"min{suffix}"), schema.get(f"max{suffix}")
        if low is not None and size < low:
            self.fail(path, f"expected at least {low} {unit}, got {size}")
        if high is not None and size > high:
            self.fail(path, f"expected at most {high} {unit}, got {size}")


def _has_type(value: object, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    return name == "object" and isinstance(value, dict)


def _json_equal(a: object, b: object) -> bool:
    """Equality of JSON values (``true`` is not ``1``, ``1`` is ``1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_json_equal, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _member_path(path: str, name: str) -> str:
    return (
        f"{path}.{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"{path}[{name!r}]"
    )


def _show(value: object) -> str:
    kind = {
        type(None): "null",
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), type(value).__name__)
    if isinstance(value, list | dict):
        return kind
    text = json.dumps(value, ensure_ascii=False) if value is not None else ""
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}".rstrip()
