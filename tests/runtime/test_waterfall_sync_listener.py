"""Library traps (issue 15): a sync listener for a waterfall event is rejected at ``ctx.on``;
``Allow(additional_context=...)`` takes plain strings and rejects other types."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from trio_agent.agent import Allow
from trio_agent.llm import Message
from trio_agent.runtime import Next, open_runtime


async def test_a_sync_listener_for_a_library_waterfall_is_rejected() -> None:
    async with open_runtime() as ctx:
        with pytest.raises(TypeError, match="waterfall"):
            ctx.on("agent/step-result", lambda payload, next: payload)


async def test_a_name_dispatched_as_a_waterfall_rejects_sync_listeners_afterwards() -> None:
    async def default() -> int:
        return 1

    async with open_runtime() as ctx:
        assert await ctx.waterfall("mine/stage", None, default) == 1
        with pytest.raises(TypeError, match="waterfall"):
            ctx.on("mine/stage", lambda payload, next: None)


async def test_async_listeners_partials_and_serial_sync_listeners_are_accepted() -> None:
    async def wrap(tag: str, payload: Any, next: Next) -> Any:
        return await next()

    class Middleware:
        async def __call__(self, payload: Any, next: Next) -> Any:
            return await next()

    async with open_runtime() as ctx:
        ctx.on("agent/step-result", functools.partial(wrap, "x"))
        ctx.on("agent/step-result", Middleware())
        ctx.on("agent/pre-step", lambda payload: None)  # serial: sync is fine


def test_allow_takes_strings_and_messages() -> None:
    allow = Allow(additional_context="note")
    (message,) = allow.additional_context
    assert message.role == "user" and message.text == "note"
    mixed = Allow(additional_context=["a", Message.user("b")])
    assert [m.text for m in mixed.additional_context] == ["a", "b"]
    assert Allow().additional_context == ()


@pytest.mark.parametrize("bad", [42, {"text": "x"}, ["ok", 3], None])
def test_allow_rejects_other_types_at_construction(bad: Any) -> None:
    with pytest.raises(TypeError, match="additional_context"):
        Allow(additional_context=bad)
