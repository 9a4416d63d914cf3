"""Structured output: the child-only ``final_result`` tool, validated against the JSON schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trio_agent.llm import GenerateRequest, ToolResultBlock, message_text
from trio_agent.subagents import (
    FINAL_RESULT,
    SubagentConfigError,
    SubagentDefinition,
    SubagentRequest,
    SubagentSchemaError,
)
from trio_agent.subagents._schema import check_schema, validate
from trio_agent.testing import text, tool_call
from trio_agent.tools import INVALID_ARGS, TOOL_ERROR

from .helpers import Scripts, open_subagents, tool_results


def _tool_text(request: GenerateRequest) -> str:
    """The text of the tool result that ends ``request``'s history."""
    block = request.messages[-1].content[0]
    assert isinstance(block, ToolResultBlock)
    return message_text(block.content)


FINDINGS = {
    "type": "object",
    "properties": {
        "bugs": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"file": {"type": "string"}, "line": {"type": "integer"}},
                "required": ["file", "line"],
                "additionalProperties": False,
            },
        },
        "verdict": {"enum": ["ok", "broken"]},
    },
    "required": ["bugs", "verdict"],
    "additionalProperties": False,
}


async def test_valid_output_is_returned_as_json(autojump_clock: object) -> None:
    output = {"bugs": [{"file": "a.py", "line": 3}], "verdict": "broken"}
    scripts = {"worker-1": [tool_call("f", FINAL_RESULT, output)]}
    async with open_subagents(scripts) as (h, service, router):
        parent = h.agent("p")
        result = await service.run(
            SubagentRequest(parent=parent, task="review", output_schema=FINDINGS)
        )
        assert result.ok
        assert result.output == output
        # Only the child sees final_result, and it is told to finish with it.
        (request,) = router.requests["worker-1"]
        assert FINAL_RESULT in {t.name for t in request.tools}
        assert f"Finish by calling the {FINAL_RESULT} tool" in (request.system or "")
        assert h.ctx.tools.get(FINAL_RESULT) is None
        # The turn ended at the call: no request after the accepted result.
        assert len(router.requests["worker-1"]) == 1


async def test_invalid_arguments_are_refused_and_the_child_retries(autojump_clock: object) -> None:
    bad = {"bugs": [{"file": "a.py", "line": "three"}], "verdict": "maybe", "extra": 1}
    good = {"bugs": [], "verdict": "ok"}
    scripts = {
        "worker-1": [tool_call("f1", FINAL_RESULT, bad), tool_call("f2", FINAL_RESULT, good)]
    }
    async with open_subagents(scripts) as (h, service, router):
        parent = h.agent("p")
        result = await service.run(
            SubagentRequest(parent=parent, task="review", output_schema=FINDINGS)
        )
        assert result.output == good
        retry = router.requests["worker-1"][1]
        assert retry.messages[-1].content[0].is_error  # type: ignore[union-attr]
        shown = _tool_text(retry)
        assert "$.bugs[0].line: expected integer, got string" in shown
        assert "$.verdict: expected one of" in shown
        assert "unexpected property 'extra'" in shown


async def test_the_refusal_code_is_invalid_args(autojump_clock: object) -> None:
    scripts = {
        "worker-1": [
            tool_call("f1", FINAL_RESULT, {"verdict": 1}),
            tool_call("f2", FINAL_RESULT, {"bugs": [], "verdict": "ok"}),
        ]
    }
    async with open_subagents(scripts) as (h, service, _router):
        codes: list[str | None] = []
        h.ctx.on("tools/result", lambda n: codes.append(n.result.code))
        parent = h.agent("p")
        await service.run(SubagentRequest(parent=parent, task="t", output_schema=FINDINGS))
        assert codes == [INVALID_ARGS, None]


async def test_a_child_that_never_calls_final_result_ends_with_a_clear_error(
    autojump_clock: object,
) -> None:
    scripts: Scripts = {
        "": [tool_call("c1", "subagent", {"task": "review"}), "ok"],
        "worker-1": [text("It looks fine to me."), text("Really, it is fine.")],
    }
    definition = SubagentDefinition("worker", "d", "i", output_schema=FINDINGS)
    async with open_subagents(scripts, definitions=(definition,)) as (h, _, router):
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        # One reminder step, then the error.
        reminder = router.requests["worker-1"][1].messages[-1]
        assert reminder.source == "steering"
        assert FINAL_RESULT in reminder.text
        (result,) = tool_results(parent.session)
        assert result.result.code == TOOL_ERROR
        assert f"ended its task without calling {FINAL_RESULT}" in result.result.text
        assert "Really, it is fine." in result.result.text  # its last answer is shown


async def test_a_non_object_schema_is_wrapped_in_a_result_argument(autojump_clock: object) -> None:
    schema = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    scripts = {
        "worker-1": [
            tool_call("f1", FINAL_RESULT, {"result": []}),
            tool_call("f2", FINAL_RESULT, {"value": ["a"]}),
            tool_call("f3", FINAL_RESULT, {"result": ["a", "b"]}),
        ]
    }
    async with open_subagents(scripts) as (h, service, router):
        parent = h.agent("p")
        result = await service.run(SubagentRequest(parent=parent, task="t", output_schema=schema))
        assert result.output == ["a", "b"]
        parameters = {t.name: t for t in router.requests["worker-1"][0].tools}[FINAL_RESULT]
        assert parameters.parameters["required"] == ["result"]
        first, second = (_tool_text(r) for r in router.requests["worker-1"][1:])
        assert "$: expected at least 1 items, got 0" in first
        assert 'takes exactly one argument, "result"' in second


async def test_a_second_final_result_is_refused(autojump_clock: object) -> None:
    good = {"bugs": [], "verdict": "ok"}
    both = tool_call("f1", FINAL_RESULT, good) + tool_call(
        "f2", FINAL_RESULT, {"bugs": [], "verdict": "broken"}
    )
    async with open_subagents({"worker-1": [both]}) as (h, service, _router):
        codes: list[str | None] = []
        h.ctx.on("tools/result", lambda n: codes.append(n.result.code))
        parent = h.agent("p")
        result = await service.run(SubagentRequest(parent=parent, task="t", output_schema=FINDINGS))
        assert result.output == good
        assert codes == [None, TOOL_ERROR]


async def test_unsupported_schemas_are_refused_up_front(autojump_clock: object) -> None:
    async with open_subagents() as (h, service, _router):
        parent = h.agent("p")
        with pytest.raises(SubagentSchemaError, match=r"\$\.properties\.x: unsupported .*if"):
            await service.run(
                SubagentRequest(
                    parent=parent,
                    task="t",
                    output_schema={"type": "object", "properties": {"x": {"if": {}}}},
                )
            )
    with pytest.raises(SubagentConfigError, match="output_schema"):
        SubagentDefinition("w", "d", "i", output_schema={"$ref": "http://example.com/s.json"})


# --- the validator ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "value", "problem"),
    [
        ({"type": "integer"}, True, "$: expected integer, got boolean true"),
        ({"type": "integer"}, 2.0, None),
        ({"type": "number"}, 2.5, None),
        ({"type": ["string", "null"]}, None, None),
        ({"const": 1}, True, "$: expected integer 1, got boolean true"),
        ({"enum": [1, "a"]}, 1.0, None),
        (
            {"type": "string", "minLength": 2, "maxLength": 3},
            "abcd",
            "$: expected at most 3 characters, got 4",
        ),
        (
            {"type": "string", "pattern": "^[a-z]+$"},
            "aB",
            '$: string "aB" does not match the pattern',
        ),
        ({"type": "number", "exclusiveMinimum": 0}, 0, "$: expected a number greater than 0"),
        ({"type": "number", "multipleOf": 0.5}, 1.5, None),
        ({"type": "number", "multipleOf": 0.5}, 1.2, "$: expected a multiple of 0.5"),
        ({"type": "array", "uniqueItems": True}, [1, True], None),
        (
            {"type": "array", "uniqueItems": True},
            [{"a": 1}, {"a": 1}],
            "$[1]: repeats an earlier item",
        ),
        (
            {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
            ["a", 1],
            "$[1]: no value is allowed here",
        ),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            1.5,
            "matches none of the allowed schemas",
        ),
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1, "matches 2 of the oneOf schemas"),
        ({"not": {"type": "null"}}, None, "must not match"),
        ({"allOf": [{"minimum": 1}, {"maximum": 2}]}, 3, "$: expected a number at most 2"),
        ({"type": "object", "required": ["a b"]}, {}, "$: required property 'a b' is missing"),
        (
            {"type": "object", "properties": {"a b": {"type": "string"}}},
            {"a b": 1},
            "$['a b']: expected string",
        ),
        ({"type": "object", "minProperties": 1}, {}, "$: expected at least 1 properties, got 0"),
        (
            {"type": "object", "additionalProperties": {"type": "integer"}},
            {"x": "1"},
            "$.x: expected integer",
        ),
        (
            {"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}},
            [1, "2"],
            "$[1]: expected integer",
        ),
        ({"type": "object", "properties": {"next": {"$ref": "#"}}}, {"next": {"next": {}}}, None),
        (True, {"anything": 1}, None),
    ],
)
def test_validation(schema: Any, value: Any, problem: str | None) -> None:
    check_schema(schema)
    problems = validate(value, schema)
    if problem is None:
        assert problems == []
    else:
        assert problems and problem in problems[0], problems


def test_a_self_reference_that_never_descends_is_reported_not_looped() -> None:
    schema = {"$ref": "#"}
    check_schema(schema)
    assert "too deeply" in validate(1, schema)[0]


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("object", "a schema must be an object or a boolean"),
        ({"type": "text"}, "$.type: got 'text'"),
        ({"required": "a"}, "$.required: expected a list"),
        ({"minLength": -1}, "$.minLength: expected a non-negative integer"),
        ({"multipleOf": 0}, "greater than 0"),
        ({"pattern": "("}, "$.pattern: invalid regular expression"),
        ({"$ref": "#/$defs/missing"}, "points at nothing"),
        ({"anyOf": []}, "$.anyOf: expected a non-empty list"),
        ({"properties": {"a": {"patternProperties": {}}}}, "$.properties.a: unsupported"),
    ],
)
def test_schema_check(schema: Any, message: str) -> None:
    with pytest.raises(SubagentSchemaError) as caught:
        check_schema(schema)
    assert message in str(caught.value)


def test_the_validator_agrees_with_jsonschema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    cases: list[tuple[dict[str, Any], object]] = [
        (FINDINGS, {"bugs": [{"file": "a", "line": 1}], "verdict": "ok"}),
        (FINDINGS, {"bugs": [{"file": "a"}], "verdict": "ok"}),
        (FINDINGS, {"bugs": [], "verdict": "ok", "x": 1}),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 2}, [1, 2, 3]),
        ({"type": "string", "pattern": "^a"}, "abc"),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "x"),
        ({"type": "number", "minimum": 0, "maximum": 1}, 1.5),
        ({"enum": [True, 1]}, 1),
        ({"type": "array", "uniqueItems": True}, [1, 1.0]),
    ]
    for schema, value in cases:
        ours = not validate(value, schema)
        theirs = jsonschema.Draft202012Validator(schema).is_valid(value)
        assert ours == theirs, (json.dumps(schema), value)
