"""The approval question shows the model's text escaped: it cannot drive the terminal."""

from __future__ import annotations

import json

from trio_agent.cli._approval import describe_arguments, printable


def test_control_characters_in_arguments_are_escaped() -> None:
    arguments = json.dumps({"path\x1b[2J": "a\nb\x1b[31m", "n": 3})
    lines = describe_arguments(arguments)
    assert lines == ["path\\x1b[2J: a\\nb\\x1b[31m", "n: 3"]
    assert all(c.isprintable() for line in lines for c in line)


def test_unparsable_arguments_are_shown_escaped_and_shortened() -> None:
    (line,) = describe_arguments("\x1b]0;title\x07" + "x" * 200)
    assert line.startswith("\\x1b]0;title\\x07")
    assert line.endswith("…")
    assert len(line) == 80


def test_printable_keeps_ordinary_text() -> None:
    assert printable("call_1 ü ok") == "call_1 ü ok"
    assert printable("id\r\n") == "id\\r\\n"
