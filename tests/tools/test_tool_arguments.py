"""Arguments: raw JSON text → strict structuring → the body; rendering of return values."""

from __future__ import annotations

import enum
from typing import Any, Literal

import attrs
import pytest
from tools_helpers import invocation, make_agent

from trio_agent.llm import ImageBlock, Message, TextBlock, ToolResult
from trio_agent.runtime import Context
from trio_agent.tools import (
    INVALID_ARGS,
    TOOL_ERROR,
    ToolCallContext,
    ToolRegistry,
    render_value,
    tool,
)
from trio_agent.tools._arguments import copy_json_object, parse_arguments_text


class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


@attrs.frozen
class Box:
    width: int
    label: str = ""


received: list[dict[str, Any]] = []


@tool
async def kitchen_sink(
    name: str,
    count: int = 1,
    ratio: float = 0.5,
    flag: bool = False,
    mode: Mode = Mode.SAFE,
    kind: Literal["a", "b"] = "a",
    tags: list[str] = [],  # noqa: B006 - a recorded default, never mutated
    pair: tuple[int, str] | None = None,
    weights: dict[str, float] = {},  # noqa: B006
    box: Box | None = None,
) -> str:
    received.append(
        {
            "name": name,
            "count": count,
            "ratio": ratio,
            "flag": flag,
            "mode": mode,
            "kind": kind,
            "tags": tags,
            "pair": pair,
            "weights": weights,
            "box": box,
        }
    )
    return "ok"


@pytest.fixture
def sink(tools: ToolRegistry) -> ToolRegistry:
    received.clear()
    tools.register(kitchen_sink)
    return tools


async def test_valid_arguments_are_structured(sink: ToolRegistry) -> None:
    arguments = (
        '{"name": "n", "count": 3.0, "ratio": 2, "flag": true, "mode": "fast", "kind": "b", '
        '"tags": ["x"], "pair": [1, "one"], "weights": {"w": 1.5}, "box": {"width": 4}}'
    )
    result = await sink.execute(invocation("kitchen_sink", arguments))
    assert result == ToolResult(result.call_id, (TextBlock("ok"),))
    assert received == [
        {
            "name": "n",
            "count": 3,
            "ratio": 2.0,
            "flag": True,
            "mode": Mode.FAST,
            "kind": "b",
            "tags": ["x"],
            "pair": (1, "one"),
            "weights": {"w": 1.5},
            "box": Box(4),
        }
    ]
    assert type(received[0]["count"]) is int and type(received[0]["ratio"]) is float


async def test_defaults_apply(sink: ToolRegistry) -> None:
    await sink.execute(invocation("kitchen_sink", '{"name": "n"}'))
    assert received[0]["count"] == 1 and received[0]["mode"] is Mode.SAFE
    assert received[0]["box"] is None


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("", "$.name: missing required property"),
        ("   ", "$.name: missing required property"),
        ('{"name": 5}', "$.name: expected string, got integer 5"),
        ('{"name": "n", "count": "3"}', '$.count: expected integer, got string "3"'),
        ('{"name": "n", "count": 1.5}', "$.count: expected integer, got number 1.5"),
        ('{"name": "n", "count": true}', "$.count: expected integer, got boolean true"),
        ('{"name": "n", "ratio": "x"}', '$.ratio: expected number, got string "x"'),
        ('{"name": "n", "flag": 1}', "$.flag: expected boolean, got integer 1"),
        (
            '{"name": "n", "mode": "slow"}',
            '$.mode: expected one of "fast", "safe", got string "slow"',
        ),
        ('{"name": "n", "kind": "c"}', '$.kind: expected one of "a", "b", got string "c"'),
        ('{"name": "n", "tags": "x"}', '$.tags: expected array, got string "x"'),
        ('{"name": "n", "tags": ["x", 2]}', "$.tags[1]: expected string, got integer 2"),
        ('{"name": "n", "pair": [1]}', "$.pair: expected array of 2 items, got array"),
        ('{"name": "n", "pair": ["1", "one"]}', '$.pair[0]: expected integer, got string "1"'),
        ('{"name": "n", "weights": []}', "$.weights: expected object, got array"),
        (
            '{"name": "n", "weights": {"w": "1"}}',
            "$.weights['w']: expected number, got string \"1\"",
        ),
        ('{"name": "n", "box": {}}', "$.box.width: missing required property"),
        ('{"name": "n", "box": {"width": 1, "x": 2}}', '$.box: unknown property "x"'),
        ('{"name": "n", "box": "big"}', '$.box: expected object, got string "big"'),
        ('{"name": "n", "extra": 1, "more": 2}', '$: unknown properties "extra", "more"'),
        (
            "{",
            "arguments are not valid JSON: Expecting property name enclosed in double quotes (line 1 column 2)",
        ),
        ('{"name": NaN}', "arguments are not valid JSON: NaN is not valid JSON"),
        (
            '\ufeff{"name": "n"}',
            "arguments are not valid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) (line 1 column 1)",
        ),
        ('{"name": "n"} x', "arguments are not valid JSON: Extra data (line 1 column 15)"),
        ("[1, 2]", "arguments must be a JSON object, got array"),
        ('"text"', "arguments must be a JSON object, got string"),
    ],
)
async def test_invalid_arguments(sink: ToolRegistry, arguments: str, problem: str) -> None:
    result = await sink.execute(invocation("kitchen_sink", arguments))
    assert result.is_error and result.code == INVALID_ARGS
    assert result.text == f'Error: invalid arguments for tool "kitchen_sink": {problem}'
    assert received == []


async def test_every_problem_is_named(sink: ToolRegistry) -> None:
    result = await sink.execute(invocation("kitchen_sink", '{"count": "x", "flag": null, "zz": 0}'))
    assert result.text == (
        'Error: invalid arguments for tool "kitchen_sink": $.name: missing required property; '
        '$.count: expected integer, got string "x"; $.flag: expected boolean, got null; '
        '$: unknown property "zz"'
    )


async def test_hand_made_tool_gets_the_parsed_object(tools: ToolRegistry) -> None:
    from trio_agent.tools import Tool

    seen: list[object] = []

    async def body(arguments: object, call: ToolCallContext) -> str:
        seen.append(arguments)
        return "done"

    tools.register(Tool("raw", "Raw.", {"type": "object"}, body))
    await tools.execute(invocation("raw", '{"anything": [1, {"goes": null}]}'))
    await tools.execute(invocation("raw", ""))
    assert seen == [{"anything": [1, {"goes": None}]}, {}]


async def test_call_context_defer_and_conclude(ctx: Context, tools: ToolRegistry) -> None:
    agent = make_agent(ctx, "A")
    contexts: list[ToolCallContext] = []
    extra = Message.user("explicit", source="plugin:test")

    @tool
    async def note(text: str, *, call: ToolCallContext) -> str:
        contexts.append(call)
        call.defer_context(text)
        call.defer_context(extra)
        call.conclude_turn()
        return "noted"

    tools.register(note)
    result = await tools.execute(invocation("note", '{"text": "remember"}', agent, "c-7"))
    assert not result.is_error
    assert result.concludes_turn is True
    first, second = result.additional_context
    assert first.role == "user" and first.source == "context" and first.text == "remember"
    assert second is extra
    (call,) = contexts
    assert (call.call_id, call.name, call.agent) == ("c-7", "note", agent)
    with pytest.raises(TypeError, match="takes a Message or a str"):
        call.defer_context(42)  # type: ignore[arg-type]


async def test_deferred_context_survives_a_raising_body(tools: ToolRegistry) -> None:
    @tool
    async def fails(*, call: ToolCallContext) -> str:
        call.defer_context("partial progress")
        call.conclude_turn()
        raise RuntimeError("disk full")

    tools.register(fails)
    result = await tools.execute(invocation("fails"))
    assert result.code == TOOL_ERROR and result.text == "Error: disk full"
    assert [m.text for m in result.additional_context] == ["partial progress"]
    assert result.concludes_turn is False


@attrs.frozen
class Report:
    lines: int
    names: tuple[str, ...]


class Opaque:
    def __str__(self) -> str:
        return "<opaque>"


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("text", (TextBlock("text"),)),
        ("", (TextBlock(""),)),
        (None, ()),
        (TextBlock("t"), (TextBlock("t"),)),
        (
            (TextBlock("a"), ImageBlock("image/png", "AA==")),
            (TextBlock("a"), ImageBlock("image/png", "AA==")),
        ),
        ([TextBlock("a")], (TextBlock("a"),)),
        ([], (TextBlock("[]"),)),
        ({"a": [1, 2], "é": None}, (TextBlock('{"a": [1, 2], "é": null}'),)),
        (["x", 1], (TextBlock('["x", 1]'),)),
        (Report(3, ("a",)), (TextBlock('{"lines": 3, "names": ["a"]}'),)),
        (Mode.FAST, (TextBlock('"fast"'),)),
        (42, (TextBlock("42"),)),
        (True, (TextBlock("true"),)),
        (float("nan"), (TextBlock("nan"),)),
        (Opaque(), (TextBlock("<opaque>"),)),
    ],
)
def test_render_value(value: object, content: tuple[object, ...]) -> None:
    assert render_value(value) == content


async def test_body_value_and_tool_result_returns(tools: ToolRegistry) -> None:
    @tool
    async def custom(*, call: ToolCallContext) -> ToolResult:
        call.defer_context("from the call")
        return ToolResult(
            "some-other-id",  # type: ignore[arg-type]
            (TextBlock("exit 1"),),
            is_error=True,
            code="EXIT_STATUS",
            additional_context=(Message.user("from the result"),),
            concludes_turn=True,
        )

    tools.register(custom)
    result = await tools.execute(invocation("custom", call_id="c-9"))
    assert result.call_id == "c-9"
    assert (result.is_error, result.code, result.text) == (True, "EXIT_STATUS", "exit 1")
    assert [m.text for m in result.additional_context] == ["from the call", "from the result"]
    assert result.concludes_turn


def test_copy_json_object_copies_every_container() -> None:
    parsed = parse_arguments_text('{"a": [1, {"b": [true, null, 1.5, "s"]}], "c": {"d": {}}}')
    assert isinstance(parsed, dict)
    copied = copy_json_object(parsed)
    assert copied == parsed
    copied["a"][1]["b"].append("x")
    copied["c"]["d"]["e"] = 1
    assert parsed == {"a": [1, {"b": [True, None, 1.5, "s"]}], "c": {"d": {}}}
