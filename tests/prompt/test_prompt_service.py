"""ctx.system_prompt: sections, variables, scoping, persona, tools and the assemble waterfall."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_agent.llm import ToolSchema
from trio_agent.prompt import (
    PromptAssembleRequest,
    PromptAssembly,
    PromptConflictError,
    PromptDefinitionError,
    PromptSection,
    SystemPrompt,
)
from trio_agent.runtime import Context, InactiveContextError, PluginConfigError
from trio_agent.testing import count_schedule_points

Next = Callable[[], Awaitable[Any]]


@attrs.frozen
class FakeAgent:
    id: str
    ctx: Context


def make_agent(root: Context, agent_id: str) -> FakeAgent:
    return FakeAgent(agent_id, root.scope_context(agent_id))


@pytest.fixture
async def prompt(ctx: Context) -> SystemPrompt:
    await ctx.plugin(SystemPrompt)
    service: SystemPrompt = ctx.system_prompt
    return service


def texts(assembly: PromptAssembly) -> list[tuple[str, str]]:
    return [(s.name, s.text) for s in assembly.sections]


async def test_sections_sorted_by_order_then_registration(prompt: SystemPrompt) -> None:
    prompt.section("late", "L", order=100)
    prompt.section("b", "B")
    prompt.section("early", "E", order=-5)
    prompt.section("a", "A")
    prompt.section("middle", "M", order=2.5)
    assembly = await prompt.assemble()
    assert texts(assembly) == [
        ("early", "E"),
        ("b", "B"),
        ("a", "A"),
        ("middle", "M"),
        ("late", "L"),
    ]
    assert assembly.sections[0] == PromptSection("early", "E", -5)
    assert prompt.render(assembly) == "E\n\nB\n\nA\n\nM\n\nL"


async def test_persona_from_config(ctx: Context) -> None:
    await ctx.plugin(SystemPrompt, {"persona": "You are terse."})
    prompt: SystemPrompt = ctx.system_prompt
    prompt.section("rules", "Rule one.")
    prompt.section("intro", "First!", order=-1)
    assembly = await prompt.assemble()
    assert texts(assembly) == [
        ("intro", "First!"),
        ("persona", "You are terse."),
        ("rules", "Rule one."),
    ]
    with pytest.raises(
        PromptConflictError, match='section "persona" is already registered globally'
    ):
        prompt.section("persona", "again")


async def test_persona_config_object_and_empty(ctx: Context) -> None:
    fiber = await ctx.plugin(SystemPrompt, SystemPrompt.Config(persona=""))
    assert (await ctx.system_prompt.assemble()).sections == ()
    await fiber.dispose()
    with pytest.raises(PluginConfigError, match="personna"):
        await ctx.plugin(SystemPrompt, {"personna": "typo"})


async def test_persona_goes_with_the_service(ctx: Context) -> None:
    fiber = await ctx.plugin(SystemPrompt, {"persona": "P"})
    await fiber.dispose()
    assert ctx.get("system_prompt") is None
    await ctx.plugin(SystemPrompt, {"persona": "Q"})
    assert texts(await ctx.system_prompt.assemble()) == [("persona", "Q")]


async def test_callable_sections_get_the_agent(ctx: Context, prompt: SystemPrompt) -> None:
    agent = make_agent(ctx, "A")
    seen: list[object] = []

    def who(a: Any) -> str:
        seen.append(a)
        return f"agent={a.id if a else None}"

    async def later(a: Any) -> str | None:
        await trio.lowlevel.checkpoint()
        return None  # an empty section

    prompt.section("who", who)
    prompt.section("empty", later)
    assert texts(await prompt.assemble(agent)) == [("who", "agent=A"), ("empty", "")]
    assert texts(await prompt.assemble()) == [("who", "agent=None"), ("empty", "")]
    assert seen == [agent, None]


async def test_agent_sections_are_scoped_and_shadow(ctx: Context, prompt: SystemPrompt) -> None:
    a, b = make_agent(ctx, "A"), make_agent(ctx, "B")
    calls: list[str] = []

    def global_style(agent: Any) -> str:
        calls.append("global style")
        return "Be formal."

    prompt.section("style", global_style, order=1)
    prompt.section("base", "Base.")
    a.ctx.system_prompt.section("style", "Be casual.", order=-1)
    a.ctx.system_prompt.section("a_only", "For A.")

    assert texts(await prompt.assemble(a)) == [
        ("style", "Be casual."),
        ("base", "Base."),
        ("a_only", "For A."),
    ]
    assert calls == []  # a shadowed provider is never called
    assert texts(await prompt.assemble(b)) == [("base", "Base."), ("style", "Be formal.")]
    assert texts(await prompt.assemble()) == [("base", "Base."), ("style", "Be formal.")]
    with pytest.raises(
        PromptConflictError, match=r'section "a_only" is already registered in <Scope A>'
    ):
        a.ctx.system_prompt.section("a_only", "again")

    await a.ctx.fiber.dispose()
    assert texts(await prompt.assemble(a)) == [("base", "Base."), ("style", "Be formal.")]
    with pytest.raises(InactiveContextError):
        a.ctx.system_prompt.section("x", "y")


async def test_every_registration_change_reaches_the_next_assembly(
    ctx: Context, prompt: SystemPrompt
) -> None:
    # What a scope sees is kept between assemblies (#17): any change must still show.
    a = make_agent(ctx, "A")
    assert texts(await prompt.assemble(a)) == []
    off_global = prompt.section("late", "Late.", order=2)
    assert texts(await prompt.assemble(a)) == [("late", "Late.")]
    off_agent = a.ctx.system_prompt.section("early", "Early.", order=1)
    a.ctx.system_prompt.variable("who", "A")
    assembly = await prompt.assemble(a)
    assert texts(assembly) == [("early", "Early."), ("late", "Late.")]
    assert dict(assembly.variables) == {"who": "A"}
    assert texts(await prompt.assemble()) == [("late", "Late.")]
    off_global()
    assert texts(await prompt.assemble(a)) == [("early", "Early.")]
    off_agent()
    assert texts(await prompt.assemble(a)) == []


async def test_a_shared_assembly_is_reused_until_something_in_it_changes(
    ctx: Context, prompt: SystemPrompt
) -> None:
    a, b = make_agent(ctx, "A"), make_agent(ctx, "B")
    mood = ["calm"]
    prompt.section("base", "Base.")
    prompt.variable("mood", lambda agent: mood[0])
    first = await prompt.assemble(a, fresh=False)
    assert await prompt.assemble(a, fresh=False) is first  # nothing changed
    assert await prompt.assemble(a) is not first  # fresh objects unless asked otherwise
    assert await prompt.assemble(b, fresh=False) is not first  # another scope
    mood[0] = "busy"  # providers still run every call
    busy = await prompt.assemble(a, fresh=False)
    assert busy is not first and dict(busy.variables) == {"mood": "busy"}
    assert await prompt.assemble(a, fresh=False) is busy
    off = a.ctx.system_prompt.section("base", "Shadowed.")
    shadowed = await prompt.assemble(a, fresh=False)
    assert texts(shadowed) == [("base", "Shadowed.")]
    off()
    assert texts(await prompt.assemble(a, fresh=False)) == [("base", "Base.")]


async def test_registrations_are_owned_and_disposable(ctx: Context, prompt: SystemPrompt) -> None:
    def plugin(plugin_ctx: Context, config: None) -> None:
        plugin_ctx.system_prompt.section("from_plugin", "P")
        plugin_ctx.system_prompt.variable("from_plugin", "v")

    fiber = await ctx.plugin(plugin)
    assembly = await prompt.assemble()
    assert texts(assembly) == [("from_plugin", "P")] and dict(assembly.variables) == {
        "from_plugin": "v"
    }
    await fiber.dispose()
    assembly = await prompt.assemble()
    assert assembly.sections == () and dict(assembly.variables) == {}

    off = prompt.section("s", "S")
    off()
    again = prompt.section("s", "S2")
    off()  # no-op: the new registration stays
    assert texts(await prompt.assemble()) == [("s", "S2")]
    again()


async def test_variables(ctx: Context, prompt: SystemPrompt) -> None:
    agent = make_agent(ctx, "A")
    prompt.variable("model", lambda a: "global-model")
    prompt.variable("cwd", lambda a: None)
    prompt.variable("greeting", "hello")

    async def agent_model(a: Any) -> str:
        return f"model-of-{a.id}"

    agent.ctx.system_prompt.variable("model", agent_model)
    prompt.section("intro", "{{greeting}}, you run on {{model}}.")

    assembly = await prompt.assemble(agent)
    assert dict(assembly.variables) == {"model": "model-of-A", "cwd": None, "greeting": "hello"}
    assert prompt.render(assembly) == "hello, you run on model-of-A."
    assert prompt.render(await prompt.assemble()) == "hello, you run on global-model."
    with pytest.raises(
        PromptConflictError, match='variable "model" is already registered globally'
    ):
        prompt.variable("model", "x")


@pytest.mark.parametrize("name", ["", "Model", "1x", "with-dash", "a b", "ümlaut"])
async def test_variable_names_are_checked(prompt: SystemPrompt, name: str) -> None:
    with pytest.raises(PromptDefinitionError, match="invalid prompt variable name"):
        prompt.variable(name, "x")


async def test_registration_errors(prompt: SystemPrompt) -> None:
    with pytest.raises(PromptDefinitionError, match="non-empty str"):
        prompt.section("", "x")
    with pytest.raises(PromptDefinitionError, match="order must be a finite number"):
        prompt.section("s", "x", order=float("nan"))
    with pytest.raises(PromptDefinitionError, match="expected a str or a callable"):
        prompt.section("s", 42)  # type: ignore[arg-type]
    prompt.section("bad", lambda agent: 7)  # type: ignore[arg-type,return-value]
    with pytest.raises(PromptDefinitionError, match='prompt section "bad" returned int'):
        await prompt.assemble()


async def test_raising_provider_propagates_with_a_note(prompt: SystemPrompt) -> None:
    def broken(agent: Any) -> str:
        raise OSError("cannot read AGENTS.md")

    prompt.variable("project", broken)
    with pytest.raises(OSError, match=r"cannot read AGENTS\.md") as info:
        await prompt.assemble()
    assert info.value.__notes__ == [
        'while resolving prompt variable "project" (registered by root)'
    ]


async def test_tools_come_from_the_tools_service(ctx: Context, prompt: SystemPrompt) -> None:
    agent = make_agent(ctx, "A")
    assert (await prompt.assemble(agent)).tools == ()

    class FakeTools:
        def __init__(self) -> None:
            self.asked: list[object] = []

        def schemas(self, agent: object = None) -> tuple[ToolSchema, ...]:
            self.asked.append(agent)
            return (ToolSchema("alpha", "A", {"type": "object"}), ToolSchema("beta", "B"))

    fake = FakeTools()
    ctx.provide("tools", fake)
    assembly = await prompt.assemble(agent)
    assert [t.name for t in assembly.tools] == ["alpha", "beta"]
    assert fake.asked == [agent]


async def test_tools_with_the_real_registry(ctx: Context, prompt: SystemPrompt) -> None:
    from trio_agent.tools import Tool, ToolRegistry

    async def body(arguments: object, call: object) -> str:
        return ""

    def make(name: str) -> Tool:
        return Tool(name, f"{name} tool", {"type": "object", "properties": {}}, body)

    await ctx.plugin(ToolRegistry)
    agent = make_agent(ctx, "A")
    ctx.tools.register(make("zeta"))
    ctx.tools.register(make("alpha"))
    agent.ctx.tools.register(make("mid"))
    assert [t.name for t in (await prompt.assemble(agent)).tools] == ["alpha", "mid", "zeta"]
    assert [t.name for t in (await prompt.assemble()).tools] == ["alpha", "zeta"]
    first, second = await prompt.assemble(agent), await prompt.assemble(agent)
    assert first == second and first.tools[0].parameters is not second.tools[0].parameters

    # The loop's form shares the registry's snapshots (#17), until the tools change ...
    shared = await prompt.assemble(agent, fresh=False)
    again = await prompt.assemble(agent, fresh=False)
    assert shared.tools == first.tools and shared.tools[0] is again.tools[0]
    agent.ctx.tools.register(make("beta"))
    changed = await prompt.assemble(agent, fresh=False)
    assert [t.name for t in changed.tools] == ["alpha", "beta", "mid", "zeta"]
    assert changed.tools[0] is not shared.tools[0]

    # ... and a system-prompt/assemble listener, which may change them, always gets fresh ones.
    seen: list[PromptAssembly] = []

    async def listener(request: PromptAssembleRequest, next: Next) -> Any:
        seen.append(request.assembly)
        return await next()

    ctx.on("system-prompt/assemble", listener)
    heard = await prompt.assemble(agent, fresh=False)
    assert heard.tools == changed.tools and heard.tools[0] is not changed.tools[0]


async def test_every_call_returns_fresh_objects(prompt: SystemPrompt) -> None:
    prompt.variable("x", "1")
    first = await prompt.assemble()
    second = await prompt.assemble()
    assert first == second and first is not second
    assert first.variables is not second.variables
    with pytest.raises(TypeError):
        first.variables["x"] = "2"  # type: ignore[index]


async def test_assemble_waterfall_replaces(ctx: Context, prompt: SystemPrompt) -> None:
    agent, other = make_agent(ctx, "A"), make_agent(ctx, "B")
    prompt.section("base", "Base.")
    seen: list[PromptAssembleRequest] = []

    async def add_reminder(request: PromptAssembleRequest, next: Next) -> Any:
        seen.append(request)
        assembly: PromptAssembly = await next()
        return attrs.evolve(
            assembly,
            sections=(*assembly.sections, PromptSection("reminder", "Remember {{who}}.", 50)),
            variables={**assembly.variables, "who": request.agent.id if request.agent else "?"},
        )

    async def replace_all(request: PromptAssembleRequest, next: Next) -> Any:
        return PromptAssembly(sections=(PromptSection("only", "Replaced."),))

    agent.ctx.on("system-prompt/assemble", add_reminder)
    assembly = await prompt.assemble(agent)
    assert prompt.render(assembly) == "Base.\n\nRemember A."
    assert seen[0].agent is agent and texts(seen[0].assembly) == [("base", "Base.")]
    assert prompt.render(await prompt.assemble(other)) == "Base."  # aimed at A's scope only

    ctx.on("system-prompt/assemble", replace_all)
    assert prompt.render(await prompt.assemble(other)) == "Replaced."


async def test_assemble_waterfall_must_return_an_assembly(
    ctx: Context, prompt: SystemPrompt
) -> None:
    async def wrong(request: PromptAssembleRequest, next: Next) -> Any:
        return "text"

    ctx.on("system-prompt/assemble", wrong)
    with pytest.raises(PromptDefinitionError, match="expected a PromptAssembly"):
        await prompt.assemble()


async def test_assemble_is_a_checkpoint(prompt: SystemPrompt) -> None:
    with trio.testing.assert_checkpoints():
        await prompt.assemble()


async def test_assemble_without_its_checkpoint_yields_only_where_a_provider_does(
    prompt: SystemPrompt,
) -> None:
    prompt.section("plain", "text")
    with count_schedule_points() as yields:
        assembly = await prompt.assemble(checkpoint=False)
    assert yields.steps == 0  # a cancellation point (the waterfall), never a schedule point
    assert [section.name for section in assembly.sections] == ["plain"]

    async def slow(agent: object) -> str:
        await trio.lowlevel.checkpoint()
        return "later"

    prompt.section("slow", slow)
    with count_schedule_points() as yields_of_slow:
        await prompt.assemble(checkpoint=False)
    assert yields_of_slow.steps == 1
