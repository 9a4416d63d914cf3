"""Registration: layers, shadowing, restrictions, ownership and change notices."""

from __future__ import annotations

import pytest
from tools_helpers import echo, invocation, make_agent, named

from trio_agent.runtime import Context, InactiveContextError, Service
from trio_agent.tools import (
    UNKNOWN_TOOL,
    ToolChange,
    ToolConflictError,
    ToolRegistry,
    ToolRestrictionError,
)


async def test_global_registration_and_lookup(tools: ToolRegistry) -> None:
    tools.register(named("zeta"))
    tools.register(named("alpha"))
    assert [s.name for s in tools.schemas()] == ["alpha", "zeta"]
    alpha = tools.get("alpha")
    assert alpha is not None and alpha.name == "alpha"
    assert tools.get("missing") is None
    assert tools.is_concurrency_safe("alpha") is False
    assert tools.is_concurrency_safe("missing") is False


async def test_shared_schemas_are_one_snapshot_per_tool_until_the_tools_change(
    tools: ToolRegistry,
) -> None:
    alpha = named("alpha")
    off = tools.register(alpha)
    fresh = tools.schemas()
    assert fresh[0].parameters is not tools.schemas()[0].parameters  # fresh: a copy each time
    shared = tools.schemas(fresh=False)
    assert shared == fresh and shared[0] is tools.schemas(fresh=False)[0]
    assert shared[0].parameters is not alpha.parameters  # a snapshot, not the tool's own dict
    tools.register(named("beta"))
    after = tools.schemas(fresh=False)
    assert [s.name for s in after] == ["alpha", "beta"] and after[0] is not shared[0]
    off()
    assert [s.name for s in tools.schemas(fresh=False)] == ["beta"]


async def test_register_rejects_non_tools(tools: ToolRegistry) -> None:
    with pytest.raises(TypeError, match="register\\(\\) takes a Tool"):
        tools.register(echo.body)  # type: ignore[arg-type]


async def test_duplicate_in_one_layer_raises_naming_the_layer(
    ctx: Context, tools: ToolRegistry
) -> None:
    tools.register(named("x"))
    with pytest.raises(
        ToolConflictError, match=r'tool "x" is already registered globally \(by root\)'
    ):
        tools.register(named("x"))
    agent = make_agent(ctx, "A")
    agent.ctx.tools.register(named("x"))
    with pytest.raises(ToolConflictError, match=r'tool "x" is already registered in <Scope A>'):
        agent.ctx.tools.register(named("x"))


async def test_agent_tools_are_scoped(ctx: Context, tools: ToolRegistry) -> None:
    a, b = make_agent(ctx, "A"), make_agent(ctx, "B")
    tools.register(named("shared"))
    a.ctx.tools.register(named("only_a", "from A"))

    assert [s.name for s in tools.schemas(a)] == ["only_a", "shared"]
    assert [s.name for s in tools.schemas(b)] == ["shared"]
    assert [s.name for s in tools.schemas()] == ["shared"]
    assert tools.get("only_a", b) is None

    assert (await tools.execute(invocation("only_a", agent=a))).text == "from A"
    for caller in (b, None):
        result = await tools.execute(invocation("only_a", agent=caller))
        assert result.code == UNKNOWN_TOOL
        assert result.text == 'Error: unknown tool "only_a"; available tools: shared'


async def test_agent_tool_shadows_global(ctx: Context, tools: ToolRegistry) -> None:
    a, b = make_agent(ctx, "A"), make_agent(ctx, "B")
    tools.register(named("read", "global"))
    a.ctx.tools.register(named("read", "agent A's"))
    assert (await tools.execute(invocation("read", agent=a))).text == "agent A's"
    assert (await tools.execute(invocation("read", agent=b))).text == "global"
    assert [s.name for s in tools.schemas(a)] == ["read"]


async def test_nested_scopes_inherit_nearest_first(ctx: Context, tools: ToolRegistry) -> None:
    parent = make_agent(ctx, "P")
    child = make_agent(parent.ctx, "C")
    tools.register(named("t", "global"))
    parent.ctx.tools.register(named("t", "parent"))
    parent.ctx.tools.register(named("p_only", "parent only"))
    assert (await tools.execute(invocation("t", agent=child))).text == "parent"
    assert [s.name for s in tools.schemas(child)] == ["p_only", "t"]


async def test_unknown_tool_lists_names_briefly(tools: ToolRegistry) -> None:
    result = await tools.execute(invocation("nothing"))
    assert result.text == 'Error: unknown tool "nothing"; no tools are available'
    for i in range(25):
        tools.register(named(f"t{i:02}"))
    result = await tools.execute(invocation("nothing"))
    assert result.text.endswith("t18, t19, and 5 more")


async def test_restrict_allow_and_deny(ctx: Context, tools: ToolRegistry) -> None:
    for name in ("read", "write", "shell"):
        tools.register(named(name))
    a, b = make_agent(ctx, "A"), make_agent(ctx, "B")
    a.ctx.tools.register(named("own"))
    off_allow = a.ctx.tools.restrict(allow=["read", "write"])
    a.ctx.tools.restrict(deny=["write"])

    assert [s.name for s in tools.schemas(a)] == ["own", "read"]  # intersected; own is exempt
    assert [s.name for s in tools.schemas(b)] == ["read", "shell", "write"]
    assert tools.get("write", a) is None
    assert not tools.is_concurrency_safe("write", a)
    result = await tools.execute(invocation("shell", agent=a))
    assert result.code == UNKNOWN_TOOL
    assert result.text == 'Error: unknown tool "shell"; available tools: own, read'

    tools.register(named("later"))  # allow lists exclude later globals
    assert "later" not in [s.name for s in tools.schemas(a)]
    off_allow()
    assert [s.name for s in tools.schemas(a)] == ["later", "own", "read", "shell"]


async def test_restrict_misuse(ctx: Context, tools: ToolRegistry) -> None:
    tools.register(named("read"))
    agent = make_agent(ctx, "A")
    agent.ctx.tools.register(named("own"))
    with pytest.raises(ToolRestrictionError, match="applies to one agent"):
        tools.restrict(allow=["read"])
    with pytest.raises(ToolRestrictionError, match="needs allow"):
        agent.ctx.tools.restrict()
    with pytest.raises(
        ToolRestrictionError, match="unknown tool\\(s\\) own, typo; known global tools: read"
    ):
        agent.ctx.tools.restrict(deny=["typo", "own"])
    with pytest.raises(ToolRestrictionError, match="not a str"):
        agent.ctx.tools.restrict(allow="read")


async def test_registration_is_owned_by_the_calling_plugin(
    ctx: Context, tools: ToolRegistry
) -> None:
    def plugin(plugin_ctx: Context, config: None) -> None:
        plugin_ctx.tools.register(named("from_plugin"))

    fiber = await ctx.plugin(plugin)
    assert tools.get("from_plugin") is not None
    await fiber.dispose()
    assert tools.get("from_plugin") is None
    tools.register(named("from_plugin"))  # the name is free again


async def test_agent_registrations_go_with_its_scope(ctx: Context, tools: ToolRegistry) -> None:
    tools.register(named("read"))
    agent = make_agent(ctx, "A")
    agent.ctx.tools.register(named("own"))
    agent.ctx.tools.restrict(deny=["read"])
    agent.ctx.tools.guard(lambda execution: "no")
    await agent.ctx.fiber.dispose()
    assert [s.name for s in tools.schemas(agent)] == ["read"]
    assert not (await tools.execute(invocation("read", agent=agent))).is_error
    with pytest.raises(InactiveContextError):
        agent.ctx.tools.register(named("late"))


async def test_disposer_unregisters_once(tools: ToolRegistry) -> None:
    off = tools.register(named("x"))
    off()
    assert tools.get("x") is None
    again = tools.register(named("x"))
    off()  # a second call is a no-op and does not remove the new registration
    assert tools.get("x") is not None
    await again.aclose()
    assert tools.get("x") is None


async def test_change_notices(ctx: Context, tools: ToolRegistry) -> None:
    global_seen: list[ToolChange] = []
    a_seen: list[ToolChange] = []
    agent = make_agent(ctx, "A")
    ctx.on("tools/change", global_seen.append)
    agent.ctx.on("tools/change", a_seen.append)
    off = tools.register(named("g"))
    agent.ctx.tools.register(named("mine"))
    off()
    assert [(c.action, c.tool.name, c.scope) for c in global_seen] == [
        ("register", "g", None),
        ("register", "mine", agent.ctx.scope),
        ("unregister", "g", None),
    ]
    assert [(c.action, c.tool.name) for c in a_seen] == [("register", "mine")]


async def test_service_view_binds_the_caller(ctx: Context, tools: ToolRegistry) -> None:
    agent = make_agent(ctx, "A")
    view = agent.ctx.tools
    assert isinstance(view, ToolRegistry) and isinstance(view, Service)
    assert view.caller is agent.ctx and tools.caller is ctx
    view.register(named("dup"))
    with pytest.raises(ToolConflictError):
        agent.ctx.tools.register(named("dup"))  # a second view, the same agent layer


async def test_cached_views_follow_every_change(ctx: Context, tools: ToolRegistry) -> None:
    tools.register(named("read"))
    agents = [make_agent(ctx, f"A{i}") for i in range(70)]  # more scopes than views are kept
    for agent in agents:
        assert [s.name for s in tools.schemas(agent)] == ["read"]
    first = agents[0]
    off = first.ctx.tools.register(named("own"))  # registered through the agent's view
    assert [s.name for s in tools.schemas(first)] == ["own", "read"]
    assert [s.name for s in tools.schemas(agents[1])] == ["read"]
    off()
    assert [s.name for s in tools.schemas(first)] == ["read"]
    lift = first.ctx.tools.restrict(deny=["read"])
    assert tools.get("read", first) is None and tools.get("read", agents[-1]) is not None
    lift()
    assert tools.get("read", first) is not None
