"""Turning the model's raw arguments text into what a tool body receives.

Arguments come from a model, so nothing is coerced: ``"5"`` is not an integer and ``"abc"`` is
not a list. :func:`strict_converter` is a copy of the shared :data:`trio_agent._serde.converter`
(same settings, same registered hooks) whose scalar and container hooks check JSON shapes
before structuring. Every problem is reported with its path (``$.limit``, ``$.items[2]``).
"""

from __future__ import annotations

import copy
import enum
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory, list_structure_factory
from cattrs.errors import (
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_mapping_structure_fn

from .._jsontext import loads
from .._serde import converter

__all__ = [
    "ArgumentsError",
    "copy_json_object",
    "json_type",
    "parse_arguments_text",
    "strict_converter",
    "structure_arguments",
]


class ArgumentsError(Exception):
    """Internal: the arguments did not validate; ``problems`` names each path."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _Mismatch(TypeError):
    """A value of the wrong JSON type or outside an enumeration (message is the whole story)."""


def json_type(value: object) -> str:
    """The JSON type name of a parsed JSON value (``object``, ``array``, ``string`` ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _shown(value: object) -> str:
    text = json.dumps(value) if isinstance(value, str | int | float | bool) else ""
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{json_type(value)} {text}".rstrip()


def _mismatch(expected: str, value: object) -> _Mismatch:
    return _Mismatch(f"expected {expected}, got {_shown(value)}")


# --- parsing ----------------------------------------------------------------------------------


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every call: ``json.loads`` with an argument builds a new one each time (#17).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parse_arguments_text(raw: object) -> dict[str, Any] | str:
    """Parse the model's arguments text into a JSON object, or return what is wrong with it.

    Empty or blank text means ``{}`` (models send that for parameterless tools).
    """
    if not isinstance(raw, str):
        return f"arguments must be JSON text, got {type(raw).__name__}"
    if not raw.strip():
        return {}
    try:
        value = loads(raw, _DECODER)
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
    except (ValueError, RecursionError) as exc:
        return f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return f"arguments must be a JSON object, got {json_type(value)}"
    return value


def copy_json_object(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON-shaped object (parsed arguments, a tool's schema parameters).

    Dicts and lists are copied by hand and JSON scalars shared (``copy.deepcopy`` pays for a memo
    per call); anything else (a tuple in a hand-made schema) goes to ``copy.deepcopy``.
    """
    return {key: _copy_json(item) for key, item in value.items()}


_JSON_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def _copy_json(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copy_json(item) for key, item in value.items()}
    if kind is list:
        return [_copy_json(item) for item in value]
    if kind in _JSON_SCALARS:
        return value
    return copy.deepcopy(value)


# --- the strict converter ---------------------------------------------------------------------


def _structure_str(value: object, _: object) -> str:
    if not isinstance(value, str):
        raise _mismatch("string", value)
    return value


def _structure_int(value: object, _: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _mismatch("integer", value)
    if isinstance(value, float):
        if not value.is_integer():
            raise _mismatch("integer", value)
        return int(value)
    return value


def _structure_float(value: object, _: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _mismatch("number", value)
    return float(value)


def _structure_bool(value: object, _: object) -> bool:
    if not isinstance(value, bool):
        raise _mismatch("boolean", value)
    return value


def _same_json_value(a: object, b: object) -> bool:
    # ``True == 1`` in Python; in JSON they are different values.
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _literal_hook(tp: Any) -> Callable[[object, object], object]:
    allowed = get_args(tp)
    expected = "one of " + ", ".join(json.dumps(v) for v in allowed)

    def structure_literal(value: object, _: object) -> object:
        for option in allowed:
            if _same_json_value(value, option):
                return option
        raise _mismatch(expected, value)

    return structure_literal


def _enum_hook(tp: type[enum.Enum]) -> Callable[[object, object], object]:
    members = list(tp)
    expected = "one of " + ", ".join(json.dumps(m.value) for m in members)

    def structure_enum(value: object, _: object) -> object:
        for member in members:
            if _same_json_value(value, member.value):
                return member
        raise _mismatch(expected, value)

    return structure_enum


def _shape_guard(
    expected: str, kind: type, hook: Callable[[Any, Any], Any]
) -> Callable[[object, object], object]:
    def structure_checked(value: object, tp: object) -> object:
        if not isinstance(value, kind):
            raise _mismatch(expected, value)
        return hook(value, tp)

    return structure_checked


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _is_list(tp: Any) -> bool:
    return tp is list or get_origin(tp) is list


def _is_dict(tp: Any) -> bool:
    return tp is dict or get_origin(tp) is dict


def _is_homogeneous_tuple(tp: Any) -> bool:
    if tp is tuple:
        return True
    args = get_args(tp)
    return get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis


def _is_fixed_tuple(tp: Any) -> bool:
    return get_origin(tp) is tuple and not _is_homogeneous_tuple(tp)


def _fixed_tuple_hook(tp: Any, conv: cattrs.Converter) -> Callable[[object, object], object]:
    element_types = get_args(tp)
    if element_types == ((),):  # tuple[()]
        element_types = ()
    hooks = [conv.get_structure_hook(t) for t in element_types]
    expected = f"array of {len(element_types)} items"

    def structure_fixed_tuple(value: object, _: object) -> tuple[Any, ...]:
        if not isinstance(value, list) or len(value) != len(element_types):
            raise _mismatch(expected, value)
        errors: list[Exception] = []
        items: list[Any] = []
        for index, (item, hook, item_type) in enumerate(
            zip(value, hooks, element_types, strict=True)
        ):
            try:
                items.append(hook(item, item_type))
            except Exception as exc:
                exc.__notes__ = [
                    *getattr(exc, "__notes__", []),
                    IterableValidationNote(f"Structuring {tp} @ index {index}", index, item_type),
                ]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return tuple(items)

    return structure_fixed_tuple


@functools.cache
def strict_converter() -> cattrs.Converter:
    """The shared converter, copied, with strict JSON-shape hooks (created on first use)."""
    strict = converter.copy()
    strict.register_structure_hook(str, _structure_str)
    strict.register_structure_hook(int, _structure_int)
    strict.register_structure_hook(float, _structure_float)
    strict.register_structure_hook(bool, _structure_bool)
    strict.register_structure_hook_factory(_is_literal, _literal_hook)
    strict.register_structure_hook_factory(_is_enum, _enum_hook)
    strict.register_structure_hook_factory(
        _is_list, lambda t: _shape_guard("array", list, list_structure_factory(t, strict))
    )
    strict.register_structure_hook_factory(
        _is_homogeneous_tuple,
        lambda t: _shape_guard("array", list, homogenous_tuple_structure_factory(t, strict)),
    )
    strict.register_structure_hook_factory(_is_fixed_tuple, lambda t: _fixed_tuple_hook(t, strict))
    strict.register_structure_hook_factory(
        _is_dict,
        lambda t: _shape_guard("object", dict, make_mapping_structure_fn(t, strict)),
    )
    strict.register_structure_hook_factory(
        attrs.has,
        lambda t: _shape_guard("object", dict, cattrs.gen.make_dict_structure_fn(t, strict)),
    )
    return strict


def _describe(exc: BaseException, _: object) -> str:
    if isinstance(exc, _Mismatch):
        return str(exc)
    if isinstance(exc, KeyError):
        return "missing required property"
    if isinstance(exc, ForbiddenExtraKeysError):
        names = ", ".join(json.dumps(k) for k in sorted(exc.extra_fields))
        return f"unknown propert{'y' if len(exc.extra_fields) == 1 else 'ies'} {names}"
    return f"invalid value ({exc})"


def _problems(exc: Exception) -> list[str]:
    problems = []
    for line in cattrs.transform_error(exc, "$", _describe):
        description, _, path = line.rpartition(" @ ")
        problems.append(f"{path}: {description}")
    return problems


def structure_arguments(arguments_type: type | None, parsed: Mapping[str, Any]) -> Any:
    """Structure the parsed JSON object into ``arguments_type`` (or return it as is).

    Raises:
        ArgumentsError: listing every problem with its path.
    """
    if arguments_type is None:
        return parsed
    try:
        return strict_converter().structure(parsed, arguments_type)
    except Exception as exc:
        raise ArgumentsError(_problems(exc)) from exc
