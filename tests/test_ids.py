"""Id brands and the session-id validator."""

from __future__ import annotations

import pytest

from trio_agent.ids import (
    AgentId,
    CallId,
    MessageId,
    SessionId,
    new_call_id,
    new_message_id,
    validate_session_id,
)


def test_brands_are_plain_strings_at_runtime() -> None:
    assert AgentId("a") == "a"
    assert SessionId("s") == "s"
    assert CallId("c") == "c"
    assert MessageId("m") == "m"


def test_factories_mint_unique_ids() -> None:
    assert len({new_message_id() for _ in range(100)}) == 100
    assert len({new_call_id() for _ in range(100)}) == 100


@pytest.mark.parametrize("good", ["a", "A1", "agent-session-1b2c.jsonl", "x_y.z-1", "9" * 200])
def test_valid_session_ids(good: str) -> None:
    assert validate_session_id(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ".hidden",
        "-flag",
        "../x",
        "a/b",
        "/etc/passwd",
        "a\\b",
        "a b",
        "nul\x00",
        "é",
        "9" * 201,
        "..",
    ],
)
def test_hostile_session_ids_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid session id"):
        validate_session_id(bad)


def test_non_string_session_id_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="must be a str"):
        validate_session_id(42)
