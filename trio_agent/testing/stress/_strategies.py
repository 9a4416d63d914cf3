"""Hypothesis strategies: JSON values for a JSON schema, tool-call arguments, model responses.

This module imports Hypothesis; the rest of the kit does not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from ...llm import ToolSchema
from ._responses import CallTools, Fail, Hang, MaxTokens, Reply, ResponseSpec, ToolCallSpec

__all__ = ["json_values", "model_responses", "tool_arguments"]

_SCALARS = st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=8)
_ANY_JSON: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
#: Arguments a careless model writes: not JSON, not an object, or an unexpected key.
_BROKEN_ARGUMENTS = st.sampled_from(["", "{", "[]", "null", '{"unexpected": 1}'])
_PIECES = st.lists(
    st.sampled_from(["Sure", ", ", "here", " it", " is", "."]), min_size=1, max_size=3
)


def json_values(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """JSON values that fit ``schema`` (the subset ``@tool`` writes: ``type`` — also a list —,
    ``enum``, ``const``, ``anyOf``/``oneOf``, ``properties``/``required``, ``items``,
    ``prefixItems``, ``minimum``/``maximum``, ``minLength``/``maxLength``,
    ``minItems``/``maxItems``); ``{}`` means any JSON."""
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([json_values(option) for option in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([json_values({**schema, "type": k}) for k in kind])
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum", -100), schema.get("maximum", 100))
    if kind == "number":
        return st.floats(
            schema.get("minimum", -100.0),
            schema.get("maximum", 100.0),
            allow_nan=False,
            allow_infinity=False,
        )
    if kind == "string":
        return st.text(
            min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 12), 12)
        )
    if kind == "array":
        return _arrays(schema)
    if kind == "object" or "properties" in schema:
        return _objects(schema)
    return _ANY_JSON


def _arrays(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    prefix = schema.get("prefixItems")
    if prefix is not None:
        return st.tuples(*(json_values(item) for item in prefix)).map(list)
    items = schema.get("items", {})
    low = schema.get("minItems", 0)
    return st.lists(json_values(items), min_size=low, max_size=max(low, schema.get("maxItems", 3)))


def _objects(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    extra = schema.get("additionalProperties")
    fixed = st.fixed_dictionaries(
        {name: json_values(s) for name, s in properties.items() if name in required},
        optional={name: json_values(s) for name, s in properties.items() if name not in required},
    )
    if isinstance(extra, Mapping) and not properties:
        return st.dictionaries(st.text(max_size=6), json_values(extra), max_size=3)
    return fixed


def tool_arguments(schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
    """Raw JSON arguments text for a tool with parameters ``schema``: usually valid, sometimes
    broken (not JSON, not an object, an unknown key), as a model may write them."""
    # No flatmap (it shrinks badly): draw both and pick; shrinking goes towards valid.
    return st.tuples(st.integers(0, 9), json_values(schema).map(json.dumps), _BROKEN_ARGUMENTS).map(
        lambda drawn: drawn[2] if drawn[0] == 9 else drawn[1]
    )


def _calls(
    schemas: Sequence[ToolSchema], duplicate_ids: bool
) -> st.SearchStrategy[tuple[ToolCallSpec, ...]]:
    targets = [
        st.tuples(st.just(schema.name), tool_arguments(schema.parameters)) for schema in schemas
    ]
    target = st.one_of([*targets, st.just(("no_such_tool", "{}"))])
    chunks = st.integers(1, 3)
    if duplicate_ids:
        ids = st.sampled_from(["call_1", "call_2", ""])
        one = st.builds(lambda t, i, c: ToolCallSpec(i, t[0], t[1], chunks=c), target, ids, chunks)
        return st.lists(one, min_size=1, max_size=3).map(tuple)
    pairs = st.lists(st.tuples(target, chunks), min_size=1, max_size=3)
    return pairs.map(
        lambda drawn: tuple(
            ToolCallSpec(f"call_{i + 1}", name, arguments, chunks=c)
            for i, ((name, arguments), c) in enumerate(drawn)
        )
    )


_CACHE: dict[tuple[str, bool], st.SearchStrategy[ResponseSpec]] = {}


def model_responses(
    schemas: Sequence[ToolSchema] = (), *, duplicate_ids: bool = True
) -> st.SearchStrategy[ResponseSpec]:
    """Model responses: text (with reasoning sometimes), tool calls to the tools ``schemas``
    describe (and to an unknown one; with ``duplicate_ids``, ids repeated or empty), max-tokens
    cut-offs, failures (retried or not) and hangs."""
    key = (json.dumps([[s.name, s.parameters] for s in schemas], sort_keys=True), duplicate_ids)
    cached = _CACHE.get(key)
    if cached is None:
        cached = _CACHE[key] = _responses(schemas, duplicate_ids)
    return cached


def _responses(
    schemas: Sequence[ToolSchema], duplicate_ids: bool
) -> st.SearchStrategy[ResponseSpec]:
    pieces = _PIECES.map(tuple)
    return st.one_of(
        st.builds(Reply, pieces, st.just(()) | st.just(("thinking",))),
        st.builds(CallTools, _calls(schemas, duplicate_ids), st.just(()) | pieces),
        st.builds(CallTools, _calls(schemas, duplicate_ids)),
        st.builds(MaxTokens, pieces),
        st.builds(
            Fail,
            st.sampled_from(["SERVER", "RATE_LIMIT", "AUTH"]),
            st.none() | st.just(1.0),
            st.just(()) | st.just(("partial",)),
        ),
        st.builds(Hang, st.just(()) | st.just(("partial",))),
    )
