"""ApprovalPolicy: each pinned default in library and CLI mode, config lists, remembered answers."""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pytest

from trio_agent.approval import ApprovalPolicy
from trio_agent.ids import CallId
from trio_agent.runtime import Context
from trio_agent.tools import (
    DENIED,
    ApprovalRequest,
    Approved,
    Denied,
    ToolInvocation,
    ToolRegistry,
    tool,
)

ran: list[str] = []


def make(name: str, read_only: bool = False) -> Any:
    async def body() -> str:
        ran.append(name)
        return name

    body.__name__ = name
    body.__doc__ = f"The {name} stand-in."
    return tool(name=name, read_only=read_only)(body)


@attrs.define
class Service:
    answers: list[Approved | Denied] = attrs.Factory(list)
    asked: list[str] = attrs.Factory(list)

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        self.asked.append(request.tool)
        return self.answers.pop(0) if self.answers else Approved()


async def mount(ctx: Context, config: ApprovalPolicy.Config) -> tuple[ToolRegistry, Service]:
    ran.clear()
    await ctx.plugin(ToolRegistry)
    tools: ToolRegistry = ctx.tools
    for name in ("write_file", "edit_file", "shell", "custom"):
        tools.register(make(name))
    tools.register(make("peek", read_only=True))
    await ctx.plugin(ApprovalPolicy, config)
    service = Service()
    ctx.provide("approval", service)
    return tools, service


def call(name: str, call_id: str = "c1") -> ToolInvocation:
    return ToolInvocation(CallId(call_id), name, "{}")


@pytest.mark.parametrize(
    ("mode", "name", "asked"),
    [
        ("library", "write_file", True),
        ("library", "edit_file", True),
        ("library", "shell", True),
        ("library", "custom", False),
        ("library", "peek", False),
        ("cli", "write_file", True),
        ("cli", "edit_file", True),
        ("cli", "shell", True),
        ("cli", "custom", True),
        ("cli", "peek", False),
    ],
)
async def test_pinned_defaults(
    ctx: Context, mode: Literal["library", "cli"], name: str, asked: bool
) -> None:
    tools, service = await mount(ctx, ApprovalPolicy.Config(mode=mode))
    result = await tools.execute(call(name))
    assert result.code is None
    assert service.asked == ([name] if asked else [])
    assert ran == [name]


async def test_read_only_is_never_asked_even_with_default_deny(ctx: Context) -> None:
    tools, service = await mount(ctx, ApprovalPolicy.Config(default="deny", deny=("peek",)))
    assert (await tools.execute(call("peek"))).code is None
    assert (await tools.execute(call("custom"))).code == DENIED
    assert service.asked == [] and ran == ["peek"]


async def test_allow_and_deny_lists(ctx: Context) -> None:
    config = ApprovalPolicy.Config(allow=("write_file",), deny=("shell",))
    tools, service = await mount(ctx, config)
    assert (await tools.execute(call("write_file"))).code is None
    result = await tools.execute(call("shell"))
    assert result.code == DENIED and "tools.approval" in result.text
    assert service.asked == [] and ran == ["write_file"]


async def test_remember_session_is_not_asked_again(ctx: Context) -> None:
    tools, service = await mount(ctx, ApprovalPolicy.Config())
    service.answers = [Approved(remember="session")]
    await tools.execute(call("shell", "c1"))
    await tools.execute(call("shell", "c2"))
    await tools.execute(call("write_file", "c3"))
    assert service.asked == ["shell", "write_file"]
    assert ran == ["shell", "shell", "write_file"]


async def test_a_denial_is_not_remembered(ctx: Context) -> None:
    tools, service = await mount(ctx, ApprovalPolicy.Config())
    service.answers = [Denied("no"), Approved()]
    assert (await tools.execute(call("shell", "c1"))).text == "Error: no"
    assert (await tools.execute(call("shell", "c2"))).code is None
    assert service.asked == ["shell", "shell"] and ran == ["shell"]


async def test_request_and_decision_are_announced_before_the_body(ctx: Context) -> None:
    tools, _ = await mount(ctx, ApprovalPolicy.Config())
    order: list[str] = []
    ctx.on("approval/request", lambda n: order.append(f"request {n.request.call_id}"))
    ctx.on("approval/decision", lambda n: order.append(f"decision {n.answer!r}"))
    ctx.on("tools/result", lambda n: order.append(f"result ran={ran}"))
    await tools.execute(call("shell"))
    assert order == ["request c1", "decision Approved(remember='once')", "result ran=['shell']"]
