"""JSON schemas from Python annotations, for the :func:`tool` decorator.

Supported: ``str``, ``int``, ``float``, ``bool``, ``None``, ``X | None`` / ``Optional[X]``,
``Literal[...]``, ``Enum`` subclasses (JSON-scalar values), ``list[X]``, ``tuple[X, ...]``,
``tuple[X, Y]``, ``dict[str, X]``, attrs classes (nested objects) and ``Any``. Objects are closed
(``additionalProperties: false``); a default makes a property optional and is recorded.
"""

from __future__ import annotations

import enum
import json
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

import attrs

from .._serde import converter
from ._docstring import parse_docstring
from ._errors import ToolDefinitionError

__all__ = ["SUPPORTED", "json_default", "object_schema", "schema_for"]

JsonSchema = dict[str, Any]

SUPPORTED = (
    "str, int, float, bool, None, X | None, Literal[...], Enum, list[X], tuple[X, ...], "
    "tuple[X, Y], dict[str, X], attrs classes, Any"
)


def schema_for(tp: Any, where: str, seen: frozenset[type] = frozenset()) -> JsonSchema:
    """The JSON schema of annotation ``tp``; ``where`` names it in error messages."""
    if tp is Any:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    simple = _SIMPLE.get(tp)
    if simple is not None:
        return {"type": simple}
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        return _enum_schema(args, where)
    if origin is Union or origin is types.UnionType:
        others = [a for a in args if a is not type(None)]
        if len(others) == 1 and len(args) == 2:
            return {"anyOf": [schema_for(others[0], where, seen), {"type": "null"}]}
        raise _unsupported(tp, where, "only X | None unions are supported")
    if tp is list or origin is list:
        return _array(args[0] if args else Any, where, seen)
    if tp is tuple or origin is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return _array(args[0] if args else Any, where, seen)
        items = [] if args == ((),) else [schema_for(a, where, seen) for a in args]
        return {
            "type": "array",
            "prefixItems": items,
            "minItems": len(items),
            "maxItems": len(items),
        }
    if tp is dict or origin is dict:
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise _unsupported(tp, where, "JSON object keys are strings: use dict[str, X]")
        return {"type": "object", "additionalProperties": schema_for(args[1], where, seen)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema(tuple(member.value for member in tp), where)
    if isinstance(tp, type) and attrs.has(tp):
        return _attrs_schema(tp, where, seen)
    raise _unsupported(tp, where)


#: ``attrs.Factory`` is typed as a function; this is its runtime class.
_FACTORY: type[Any] = type(attrs.Factory(list))

_SIMPLE: Mapping[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _unsupported(tp: Any, where: str, hint: str = "") -> ToolDefinitionError:
    return ToolDefinitionError(
        f"{where}: unsupported annotation {tp!r}{'; ' + hint if hint else ''}; "
        f"supported are {SUPPORTED}"
    )


def _array(item: Any, where: str, seen: frozenset[type]) -> JsonSchema:
    if item is Any:
        return {"type": "array"}
    return {"type": "array", "items": schema_for(item, where, seen)}


def _enum_schema(values: tuple[Any, ...], where: str) -> JsonSchema:
    types_seen = []
    for value in values:
        kind = _scalar_type(value)
        if kind is None:
            raise ToolDefinitionError(
                f"{where}: enumeration value {value!r} is not a JSON scalar; use str, int, "
                "float, bool or None values"
            )
        if kind not in types_seen:
            types_seen.append(kind)
    schema: JsonSchema = {"enum": list(values)}
    if len(types_seen) == 1:
        schema = {"type": types_seen[0], **schema}
    return schema


def _scalar_type(value: object) -> str | None:
    if value is None:
        return "null"
    for cls, name in _SIMPLE.items():
        if type(value) is cls:
            return name
    return None


def _attrs_schema(cls: type, where: str, seen: frozenset[type]) -> JsonSchema:
    if cls in seen:
        raise ToolDefinitionError(
            f"{where}: attrs class {cls.__qualname__} refers to itself; recursive types are "
            "not supported"
        )
    try:
        attrs.resolve_types(cls)
    except NameError as exc:
        raise ToolDefinitionError(
            f"{where}: cannot resolve the annotations of {cls.__qualname__}: {exc}"
        ) from exc
    doc = parse_docstring(cls.__doc__)
    properties: dict[str, tuple[JsonSchema, bool]] = {}
    for field in attrs.fields(cls):
        if not field.init:
            continue
        field_where = f"{where} ({cls.__qualname__}.{field.name})"
        schema = schema_for(field.type, field_where, seen | {cls})
        has_default = field.default is not attrs.NOTHING
        if has_default:
            default = field.default
            if isinstance(default, _FACTORY):
                if not default.takes_self:
                    schema["default"] = json_default(default.factory(), field_where)
            else:
                schema["default"] = json_default(default, field_where)
        _describe(schema, doc.params.get(field.name))
        properties[field.name] = (schema, not has_default)
    schema = object_schema(properties)
    if doc.description:
        schema = {"description": doc.description.split("\n\n", 1)[0].replace("\n", " "), **schema}
    return schema


def _describe(schema: JsonSchema, description: str | None) -> None:
    if description:
        schema["description"] = description


def object_schema(properties: Mapping[str, tuple[JsonSchema, bool]]) -> JsonSchema:
    """A closed object schema from ``name -> (schema, required)``, in declaration order."""
    schema: JsonSchema = {
        "type": "object",
        "properties": {name: s for name, (s, _) in properties.items()},
    }
    required = [name for name, (_, is_required) in properties.items() if is_required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def json_default(value: object, where: str) -> Any:
    """``value`` as JSON data for a schema's ``default``; raises if it has no JSON form."""
    try:
        data = converter.unstructure(value)
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"{where}: default {value!r} has no JSON form ({exc}); use a JSON-compatible "
            "default, or None"
        ) from exc
    return data
