"""The BuiltinTools plugin, its config, builtin_tools(), and the real agent loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from builtin_helpers import Mount, ok

from trio_agent.ids import CallId
from trio_agent.llm import ToolResult
from trio_agent.runtime import Context, PluginConfigError
from trio_agent.session import ToolResultEvent
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import DENIED, ToolInvocation, ToolRegistry
from trio_agent.tools.builtin import (
    BUILTIN_TOOL_NAMES,
    BuiltinTools,
    BuiltinToolsConfig,
    BuiltinToolsConfigError,
    Workspace,
    builtin_tools,
)

# --- builtin_tools() --------------------------------------------------------------------------


def test_builtin_tools_default(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    tools = builtin_tools()
    assert (
        tuple(t.name for t in tools)
        == BUILTIN_TOOL_NAMES
        == (
            "read_file",
            "write_file",
            "edit_file",
            "list_dir",
            "glob",
            "grep",
            "shell",
        )
    )
    assert {t.name for t in tools if t.concurrency_safe} == {
        "read_file",
        "list_dir",
        "glob",
        "grep",
    }
    schemas = {t.name: t.parameters for t in tools}
    # The offline demo model calls these with exactly these argument names.
    assert schemas["list_dir"]["properties"].keys() == {"path"}
    assert schemas["read_file"]["required"] == ["path"]
    assert schemas["write_file"]["required"] == ["path", "content"]
    assert schemas["shell"]["required"] == ["command"]
    assert schemas["glob"]["required"] == ["pattern"]
    assert schemas["edit_file"]["required"] == ["path", "old", "new"]
    assert schemas["grep"]["properties"].keys() == {"pattern", "path", "glob", "ignore_case"}
    assert "2000 lines / 262144 bytes" in tools[0].description


def test_builtin_tools_subset_and_workspace(root: Path) -> None:
    config = BuiltinToolsConfig(enabled=("shell", "read_file"))
    tools = builtin_tools(config, workspace=Workspace(root))
    assert [t.name for t in tools] == ["read_file", "shell"]
    assert builtin_tools(BuiltinToolsConfig(enabled=(), root=str(root))) == ()


# --- config -----------------------------------------------------------------------------------


def test_config_defaults() -> None:
    config = BuiltinToolsConfig()
    assert config.root is None
    assert config.enabled == BUILTIN_TOOL_NAMES
    assert config.shell == "deny"
    assert config.shell_policy.mode == "deny"
    assert config.shell_timeout == 30.0
    assert (config.max_output_bytes, config.max_read_bytes) == (32 * 1024, 256 * 1024)
    assert (config.max_read_lines, config.max_results) == (2000, 500)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"enabled": ("read_file", "cat")},
            r"enabled: unknown tool\(s\) 'cat'; the built-in tools are read_file",
        ),
        ({"enabled": ("glob", "glob")}, "'glob' listed more than once"),
        ({"enabled": "shell"}, "expected a list of tool names"),
        ({"shell": "sometimes"}, "shell: 'sometimes' is not a shell policy"),
        ({"shell": ()}, "an empty prefix list allows nothing"),
        ({"shell_timeout": 0}, "shell_timeout: got 0; expected a positive"),
        ({"shell_timeout": float("inf")}, "shell_timeout: got inf"),
        ({"max_results": 0}, "max_results: got 0; expected a positive integer"),
        ({"max_read_bytes": True}, "max_read_bytes: got True"),
        ({"root": ""}, "root: got ''"),
    ],
)
def test_config_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(BuiltinToolsConfigError, match=message):
        BuiltinToolsConfig(**kwargs)  # type: ignore[arg-type]


async def test_plugin_config_errors_name_the_problem(ctx: Context, root: Path) -> None:
    await ctx.plugin(ToolRegistry)
    with pytest.raises(
        PluginConfigError, match=r"BuiltinToolsConfig.shell: 'alow' is not a shell policy"
    ):
        await ctx.plugin(BuiltinTools, {"shell": "alow"})
    with pytest.raises(PluginConfigError, match=r"enabled: unknown tool\(s\) 'cat'"):
        await ctx.plugin(BuiltinTools, {"enabled": ["cat"]})
    with pytest.raises(PluginConfigError, match=r"shell\[0\]: an empty prefix"):
        await ctx.plugin(BuiltinTools, {"shell": [""]})
    with pytest.raises(PluginConfigError, match=r"extra fields found \(shel\)"):
        await ctx.plugin(BuiltinTools, {"shel": "allow"})
    with pytest.raises(PluginConfigError, match=r"BuiltinTools.shell"):
        await ctx.plugin(BuiltinTools, {"shell": 3})
    with pytest.raises(BuiltinToolsConfigError, match="not an existing directory"):
        await ctx.plugin(BuiltinTools, {"root": str(root / "missing")})
    assert ctx.tools.schemas() == ()


# --- the plugin -------------------------------------------------------------------------------


async def test_plugin_registers_and_unregisters(ctx: Context, root: Path) -> None:
    await ctx.plugin(ToolRegistry)
    fiber = await ctx.plugin(
        BuiltinTools, {"root": str(root), "enabled": ["read_file", "shell"], "shell": ["ls"]}
    )
    assert [s.name for s in ctx.tools.schemas()] == ["read_file", "shell"]
    assert fiber.instance.workspace == Workspace(root)
    await fiber.dispose()
    assert ctx.tools.schemas() == ()


async def test_plugin_waits_for_the_registry(ctx: Context, root: Path) -> None:
    fiber = await ctx.plugin(BuiltinTools, {"root": str(root)})
    assert fiber.state.name == "PENDING"
    await ctx.plugin(ToolRegistry)
    await fiber.wait_active()
    assert len(ctx.tools.schemas()) == len(BUILTIN_TOOL_NAMES)


async def test_root_defaults_to_the_cwd_at_load(
    ctx: Context, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "here.txt").write_text("here\n")
    monkeypatch.chdir(root)
    await ctx.plugin(ToolRegistry)
    await ctx.plugin(BuiltinTools)
    assert await ok(ctx, "list_dir") == "here.txt"


async def test_execute_directly(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "a.txt").write_text("hello\n")
    await mount()
    result = await ctx.tools.execute(
        ToolInvocation(CallId("c-1"), "read_file", json.dumps({"path": "a.txt"}))
    )
    assert (result.call_id, result.is_error, result.text) == ("c-1", False, "hello\n")
    result = await ctx.tools.execute(
        ToolInvocation(CallId("c-2"), "read_file", json.dumps({"path": "../a.txt"}))
    )
    assert (result.call_id, result.is_error, result.code) == ("c-2", True, DENIED)


# --- through the agent loop -------------------------------------------------------------------


async def test_tools_in_a_real_turn(root: Path) -> None:
    (root / "notes.md").write_text("# Notes\nTODO: write tests\n")
    script = [
        tool_call("c1", "list_dir", {"path": "."}),
        tool_call("c2", "read_file", {"path": "notes.md"})
        + tool_call("c3", "grep", {"pattern": "TODO"})
        + tool_call("c4", "read_file", {"path": "../../etc/passwd"}),
        tool_call("c5", "edit_file", {"path": "notes.md", "old": "TODO", "new": "DONE"}),
        tool_call("c6", "write_file", {"path": "out/summary.txt", "content": "done\n"})
        + tool_call("c7", "shell", {"command": "ls"}),
        text("All done."),
    ]
    tools = builtin_tools(BuiltinToolsConfig(root=str(root)))
    async with open_test_harness(script, tools=tools) as h:
        agent = h.agent()
        agent.send("tidy up")
        with trio.fail_after(10):
            await agent.wait_idle()
        logged: dict[str, ToolResult] = {
            e.payload_as(ToolResultEvent).call_id: e.payload_as(ToolResultEvent).result
            for e in agent.session.events
            if e.type == "tool/result"
        }
    assert list(logged) == ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]
    assert logged["c1"].text == "notes.md"
    assert logged["c2"].text == "# Notes\nTODO: write tests\n"
    assert logged["c3"].text == "notes.md:2: TODO: write tests"
    assert logged["c4"].is_error and logged["c4"].code == DENIED
    assert logged["c4"].text.startswith('Error: path "../../etc/passwd" is outside the workspace')
    assert logged["c5"].text == 'Edited "notes.md": replaced 1 line at line 2 with 1 line'
    assert logged["c6"].text == 'Wrote 5 bytes to "out/summary.txt" (created the file)'
    assert logged["c7"].is_error and logged["c7"].code == DENIED
    assert (root / "notes.md").read_text() == "# Notes\nDONE: write tests\n"
    assert (root / "out" / "summary.txt").read_text() == "done\n"
