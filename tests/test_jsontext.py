"""``trio_agent._jsontext``: ``loads`` returns or raises what ``json.loads`` does, text by text;
``dumps_compact`` what the compact, strict ``json.dumps`` does, value by value."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent._jsontext import dumps_compact, loads

TEXTS = [
    "{}",
    '{"a": [1, 2.5, null, true], "b": "ünï"}',
    " {} ",
    "{}\n",
    "\t[1]",
    "",
    "   ",
    "\ufeff{}",
    "{} x",
    "{} {}",
    "{",
    '"str"',
    "NaN",
    "[" * 100_000,
]


@pytest.mark.parametrize("text", TEXTS, ids=lambda t: repr(t[:12]))
def test_loads_returns_or_raises_what_json_loads_does(text: str) -> None:
    assert _outcome(loads, text) == _outcome(json.loads, text)


def _outcome(load: Callable[[str], object], text: str) -> tuple[str, str]:
    try:
        return "value", repr(load(text))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


def test_loads_keeps_the_decoders_options() -> None:
    def reject(name: str) -> object:
        raise ValueError(f"{name} is not valid JSON")

    strict = json.JSONDecoder(parse_constant=reject)
    with pytest.raises(ValueError, match="NaN is not valid JSON"):
        loads('{"a": NaN}', strict)


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _dumped(dump: Callable[[object], str], value: object) -> tuple[str, str]:
    try:
        return "text", dump(value)
    except (ValueError, TypeError) as exc:
        return type(exc).__name__, str(exc)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities included: both must refuse them alike
    | st.text(st.characters(codec="utf-8") | st.sampled_from(["\ud800", "\u2028", "\x00"])),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_dumps_compact_writes_what_json_dumps_does(value: object) -> None:
    assert _dumped(dumps_compact, value) == _dumped(_dumps, value)


@pytest.mark.parametrize("value", [object(), {"a": {1, 2}}, {(1,): 2}, b"bytes"], ids=repr)
def test_dumps_compact_refuses_what_json_dumps_refuses(value: object) -> None:
    assert _dumped(dumps_compact, value) == _dumped(_dumps, value)
    assert _dumped(dumps_compact, value)[0] == "TypeError"
