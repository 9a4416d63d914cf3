"""@tool: names, descriptions, JSON schemas from annotations, and definition errors."""

from __future__ import annotations

import enum
from typing import Any, Literal, Optional

import attrs
import pytest

from trio_agent.llm import ToolSchema
from trio_agent.tools import Tool, ToolCallContext, ToolDefinitionError, tool


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    """A point on the grid.

    Attributes:
        x: Column.
        y: Row.
    """

    x: int
    y: int = 0
    tags: list[str] = attrs.Factory(list)


@attrs.frozen
class Node:
    children: list[Node]


NO_JSON_FORM = object()


def params(fn: Any) -> dict[str, Any]:
    parameters: dict[str, Any] = dict(tool(fn).parameters)
    return parameters


def prop(annotation_fn: Any) -> dict[str, Any]:
    """The schema of the single parameter ``value`` of ``annotation_fn``."""
    schema: dict[str, Any] = params(annotation_fn)["properties"]["value"]
    return schema


async def t_str(value: str) -> None: ...
async def t_int(value: int) -> None: ...
async def t_float(value: float) -> None: ...
async def t_bool(value: bool) -> None: ...
async def t_none(value: None) -> None: ...
async def t_optional(value: Optional[int]) -> None: ...  # noqa: UP045 - testing the old spelling
async def t_union_none(value: str | None) -> None: ...
async def t_literal(value: Literal["a", "b"]) -> None: ...
async def t_literal_int(value: Literal[1, 2]) -> None: ...
async def t_literal_mixed(value: Literal["a", 1]) -> None: ...
async def t_enum(value: Color) -> None: ...
async def t_int_enum(value: Level) -> None: ...
async def t_list(value: list[int]) -> None: ...
async def t_bare_list(value: list) -> None: ...  # type: ignore[type-arg]
async def t_tuple(value: tuple[str, ...]) -> None: ...
async def t_fixed_tuple(value: tuple[int, str]) -> None: ...
async def t_dict(value: dict[str, float]) -> None: ...
async def t_any(value: Any) -> None: ...
async def t_nested(value: list[dict[str, Color | None]]) -> None: ...


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (t_str, {"type": "string"}),
        (t_int, {"type": "integer"}),
        (t_float, {"type": "number"}),
        (t_bool, {"type": "boolean"}),
        (t_none, {"type": "null"}),
        (t_optional, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (t_union_none, {"anyOf": [{"type": "string"}, {"type": "null"}]}),
        (t_literal, {"type": "string", "enum": ["a", "b"]}),
        (t_literal_int, {"type": "integer", "enum": [1, 2]}),
        (t_literal_mixed, {"enum": ["a", 1]}),
        (t_enum, {"type": "string", "enum": ["red", "green"]}),
        (t_int_enum, {"type": "integer", "enum": [1, 2]}),
        (t_list, {"type": "array", "items": {"type": "integer"}}),
        (t_bare_list, {"type": "array"}),
        (t_tuple, {"type": "array", "items": {"type": "string"}}),
        (
            t_fixed_tuple,
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (t_dict, {"type": "object", "additionalProperties": {"type": "number"}}),
        (t_any, {}),
        (
            t_nested,
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": {
                        "anyOf": [{"type": "string", "enum": ["red", "green"]}, {"type": "null"}]
                    },
                },
            },
        ),
    ],
)
def test_schema_for_each_annotation(fn: Any, expected: dict[str, Any]) -> None:
    assert prop(fn) == expected
    assert params(fn)["required"] == ["value"]


def test_attrs_class_becomes_a_closed_nested_object() -> None:
    async def place(point: Point) -> None: ...

    assert params(place) == {
        "type": "object",
        "properties": {
            "point": {
                "description": "A point on the grid.",
                "type": "object",
                "properties": {
                    "x": {"type": "integer", "description": "Column."},
                    "y": {"type": "integer", "default": 0, "description": "Row."},
                    "tags": {"type": "array", "items": {"type": "string"}, "default": []},
                },
                "required": ["x"],
                "additionalProperties": False,
            }
        },
        "required": ["point"],
        "additionalProperties": False,
    }


def test_full_tool_from_docstring_and_defaults() -> None:
    @tool
    async def read_file(
        path: str, limit: int = 100, mode: Color = Color.RED, since: float | None = None
    ) -> str:
        """Read a text file.

        Returns at most ``limit`` lines.

        Args:
            path: The file to read,
                relative to the workspace.
            limit (int): At most this many lines.

        Returns:
            The text.
        """
        return path

    assert isinstance(read_file, Tool)
    assert read_file.name == "read_file"
    assert read_file.description == "Read a text file.\n\nReturns at most ``limit`` lines."
    assert read_file.timeout is None
    assert read_file.concurrency_safe is False
    assert read_file.schema == ToolSchema(
        "read_file",
        "Read a text file.\n\nReturns at most ``limit`` lines.",
        {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "The file to read, relative to the workspace.",
                },
                "limit": {
                    "type": "integer",
                    "default": 100,
                    "description": "At most this many lines.",
                },
                "mode": {"type": "string", "enum": ["red", "green"], "default": "red"},
                "since": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    )


def test_options_and_call_context_parameter() -> None:
    @tool(name="search", description="Find things.", timeout=2.5, concurrency_safe=True)
    async def search_files(pattern: str, *, call: ToolCallContext) -> list[str]:
        """Ignored docstring.

        Args:
            pattern: Glob.
            call: Not a schema property.
        """
        return []

    assert search_files.name == "search"
    assert search_files.description == "Find things."
    assert search_files.timeout == 2.5
    assert search_files.concurrency_safe is True
    assert search_files.parameters == {
        "type": "object",
        "properties": {"pattern": {"type": "string", "description": "Glob."}},
        "required": ["pattern"],
        "additionalProperties": False,
    }


def test_no_parameters_and_no_docstring() -> None:
    @tool()
    async def ping() -> str:
        return "pong"

    assert ping.description == ""
    assert ping.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


def test_schema_is_a_fresh_copy() -> None:
    schema = tool(t_list).schema
    schema.parameters["properties"]["value"]["items"]["type"] = "string"
    assert tool(t_list).schema.parameters["properties"]["value"]["items"] == {"type": "integer"}


async def body(arguments: object, call: ToolCallContext) -> str:
    return "x"


def test_hand_made_tool_validation() -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name 'has space'"):
        Tool("has space", "", {"type": "object"}, body)
    with pytest.raises(ToolDefinitionError, match="invalid tool timeout 0"):
        Tool("ok", "", {"type": "object"}, body, timeout=0)
    with pytest.raises(ToolDefinitionError, match="invalid tool timeout inf"):
        Tool("ok", "", {"type": "object"}, body, timeout=float("inf"))
    with pytest.raises(ToolDefinitionError, match="expected a JSON schema of type 'object'"):
        Tool("ok", "", {"type": "array"}, body)
    parameters = {"type": "object", "properties": {}}
    made = Tool("ok", "", parameters, body)
    parameters["properties"] = {"changed": {}}
    assert made.parameters == {"type": "object", "properties": {}}


def test_definition_errors() -> None:
    def sync(x: int) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match="needs an 'async def' function"):
        tool(sync)  # type: ignore[arg-type]

    async def untyped(x) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match="'x' of tool 'untyped' has no annotation"):
        tool(untyped)

    async def variadic(*xs: int) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match="variadic positional parameters cannot"):
        tool(variadic)

    async def positional(x: int, /) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match="positional-only parameters cannot"):
        tool(positional)

    async def union(x: int | str) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match=r"only X \| None unions are supported"):
        tool(union)

    async def weird(x: set[int]) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match=r"unsupported annotation set\[int\]"):
        tool(weird)

    async def int_keys(x: dict[int, str]) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match=r"use dict\[str, X\]"):
        tool(int_keys)

    async def recursive(x: Node) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match="refers to itself"):
        tool(recursive)

    async def positional_context(call: ToolCallContext) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match="must be keyword-only"):
        tool(positional_context)

    async def bad_default(x: Any = NO_JSON_FORM) -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match=r"default <object object at .*> has no JSON"):
        tool(bad_default)

    async def documented_typo(path: str) -> str:
        """Do it.

        Args:
            pth: Typo.
        """
        return ""

    with pytest.raises(ToolDefinitionError, match="documents pth, which the function does not"):
        tool(documented_typo)


def test_schema_copies_what_is_not_json_shaped_too() -> None:
    # Hand-made parameters may hold other containers: they are deep-copied, never shared.
    nested = {"enum": ("a", ["b"])}
    made = Tool("t", "", {"type": "object", "properties": {"v": nested}}, body)
    first, second = made.schema.parameters, made.schema.parameters
    assert first == second == made.parameters
    assert first["properties"]["v"]["enum"][1] is not second["properties"]["v"]["enum"][1]
    first["properties"]["v"]["enum"][1].append("c")
    assert made.parameters["properties"]["v"]["enum"] == ("a", ["b"])
