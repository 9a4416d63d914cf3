"""The approval answers richer than a bool, the no-service reason, and the legacy bool seam."""

from __future__ import annotations

import warnings
from typing import Any

import attrs
import pytest

from trio_agent._deprecate import TrioAgentDeprecationWarning
from trio_agent.ids import CallId
from trio_agent.runtime import Context
from trio_agent.tools import (
    DENIED,
    ApprovalRequest,
    Approved,
    Ask,
    Denied,
    ToolExecution,
    ToolInvocation,
    ToolRegistry,
    tool,
)

Next = Any

ran: list[str] = []


@tool
async def probe(text: str) -> str:
    """Record that the body ran.

    Args:
        text: Anything.
    """
    ran.append(text)
    return text


@pytest.fixture
async def tools(ctx: Context) -> ToolRegistry:
    ran.clear()
    await ctx.plugin(ToolRegistry)
    registry: ToolRegistry = ctx.tools
    registry.register(probe)

    async def ask(execution: ToolExecution, next: Next) -> Any:
        return Ask("it writes")

    ctx.on("tools/pre-execute", ask)
    return registry


def call(call_id: str = "c1") -> ToolInvocation:
    return ToolInvocation(CallId(call_id), "probe", '{"text": "hi"}')


@attrs.define
class Service:
    answers: list[Approved | Denied]
    asked: list[ApprovalRequest] = attrs.Factory(list)

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        self.asked.append(request)
        return self.answers.pop(0)


async def test_approved_runs_the_body(ctx: Context, tools: ToolRegistry) -> None:
    service = Service([Approved(), Approved(remember="session")])
    ctx.provide("approval", service)
    assert (await tools.execute(call())).text == "hi"
    assert (await tools.execute(call("c2"))).text == "hi"
    assert ran == ["hi", "hi"]
    assert service.asked[0] == ApprovalRequest(
        None, CallId("c1"), "probe", '{"text": "hi"}', "it writes", False
    )


async def test_denied_never_runs_the_body(ctx: Context, tools: ToolRegistry) -> None:
    ctx.provide("approval", Service([Denied("the user said no")]))
    result = await tools.execute(call())
    assert (result.code, result.text) == (DENIED, "Error: the user said no")
    assert ran == []


async def test_no_service_names_every_way_to_allow(tools: ToolRegistry) -> None:
    result = await tools.execute(call())
    assert result.code == DENIED
    for way in ("--yes", "--allow", "tools.approval", "approval service"):
        assert way in result.text
    assert ran == []


@attrs.define
class LegacyService:
    answer: bool

    async def request(self, execution: ToolExecution, reason: str | None) -> bool:
        return self.answer


@pytest.mark.parametrize(("answer", "runs"), [(True, True), (False, False)])
async def test_a_legacy_bool_service_works_with_one_deprecation_warning(
    ctx: Context, tools: ToolRegistry, answer: bool, runs: bool
) -> None:
    ctx.provide("approval", LegacyService(answer))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await tools.execute(call())
    deprecations = [w for w in caught if issubclass(w.category, TrioAgentDeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in caught]
    message = str(deprecations[0].message)
    assert "deprecated" in message and "Approved()" in message and "#14" in message
    assert isinstance(deprecations[0].message, DeprecationWarning)
    assert (result.code is None) is runs
    assert ran == (["hi"] if runs else [])


async def test_a_bool_returned_by_a_new_style_service_also_warns(
    ctx: Context, tools: ToolRegistry
) -> None:
    class Half:
        async def request(self, request: ApprovalRequest) -> Any:
            return True

    ctx.provide("approval", Half())
    with pytest.warns(TrioAgentDeprecationWarning):
        assert (await tools.execute(call())).text == "hi"
