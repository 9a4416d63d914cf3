"""``trio_agent._jsontext.loads``: what ``json.loads`` returns or raises, text by text."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from trio_agent._jsontext import loads

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
