"""``trio-agent`` with plugins from the config: ``trio-agent plugins``, a provider from a plugin,
a plugin that fails, MCP servers that do not start, and the config file the tools protect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

CLI = Path(sys.executable).parent / "trio-agent"
#: A directory laid out like site-packages holding the test distribution trio-agent-hello.
SITE = Path(__file__).parents[1] / "plugin_dist"
MCP_SERVER = Path(__file__).parents[1] / "mcp" / "mcp_server.py"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("alpha\n")
    return tmp_path


async def trio_agent(workspace: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([str(SITE), *filter(None, [env.get("PYTHONPATH")])])
    with trio.fail_after(90):
        return await trio.run_process(
            [str(CLI), *args],
            cwd=workspace,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_plugins_lists_the_installed_and_the_configured(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text(
        "mcp: {servers: []}\nplugins: [{use: hello, name: greeter}, {use: trio_agent_hello:fixed_model}]\n"
    )
    result = await trio_agent(workspace, "plugins")
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "installed (trio_agent.plugins entry points):"
    assert "  broken\ttrio_agent_hello:Broken  (trio-agent-hello 0.1)" in lines
    assert "  hello\ttrio_agent_hello:EchoModel  (trio-agent-hello 0.1)" in lines
    assert lines[lines.index("configured (trio-agent.yml):") + 1 :] == [
        "  $.mcp\tmcp\ttrio_agent.mcp:McpServers\tok",
        "  $.plugins[0]\tgreeter\thello\tok; providers echo",
        "  $.plugins[1]\ttrio_agent_hello:fixed_model\ttrio_agent_hello:fixed_model\tok; providers fixed",
    ]
    result = await trio_agent(workspace, "plugins", "--json")
    listing = json.loads(result.stdout)
    assert {
        "name": "hello",
        "use": "trio_agent_hello:EchoModel",
        "distribution": "trio-agent-hello 0.1",
    } in listing["installed"]
    assert listing["configured"][1] == {
        "source": "$.plugins[0]",
        "name": "greeter",
        "use": "hello",
        "providers": ["echo"],
    }


async def test_plugins_shows_what_cannot_be_loaded_and_exits_2(workspace: Path) -> None:
    (workspace / "bad.yml").write_text(
        "plugins: [{use: nowhere:Thing}, {use: hello, config: {timeout: soon}}, {use: hello, name: ok}]\n"
        "agents: [{id: a, provider: echo}]\n"
    )
    result = await trio_agent(workspace, "plugins", "-c", "bad.yml")
    assert result.returncode == 2
    configured = result.stdout.decode().split("configured (bad.yml):\n")[1].splitlines()
    assert configured == [
        "  $.plugins[0]\tnowhere:Thing\tnowhere:Thing\terror: $.plugins[0]: cannot import "
        "nowhere:Thing: No module named 'nowhere'",
        "  $.plugins[1]\thello\thello\terror: $.plugins[1].config.timeout: expected a number",
        "  $.plugins[2]\tok\thello\tok; providers echo",
    ]
    assert result.stderr.decode() == (
        "trio-agent: CONFIG: 2 configured plugin(s) cannot be loaded (see above)\n"
    )


async def test_run_on_a_plugins_provider(workspace: Path) -> None:
    (workspace / "trio-agent.yml").write_text(
        "plugins: [{use: hello, config: {greeting: Howdy}}]\nllm: {default_provider: echo}\n"
    )
    result = await trio_agent(workspace, "run", "partner")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == "Howdy, partner\n"


async def test_a_plugin_that_fails_is_a_config_error(workspace: Path) -> None:
    (workspace / "f.yml").write_text("plugins: [{use: broken}]\n")
    result = await trio_agent(workspace, "run", "-c", "f.yml", "hi")
    assert result.returncode == 2
    assert result.stderr.decode().splitlines()[-1] == (
        "trio-agent: CONFIG: f.yml: $.plugins[0]: plugin 'broken' (broken) failed to load: "
        "RuntimeError: the broken plugin always fails"
    )
    (workspace / "f.yml").write_text("plugins: [{use: hello, config: {timeout: soon}}]\n")
    result = await trio_agent(workspace, "run", "-c", "f.yml", "hi")
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "trio-agent: CONFIG: f.yml: $.plugins[0].config.timeout: expected a number\n"
    )


async def test_mcp_servers_that_do_not_start_are_reported_and_the_run_goes_on(
    workspace: Path,
) -> None:
    (workspace / "trio-agent.yml").write_text(
        f"""
mcp:
  servers:
    - {{name: up, command: {sys.executable!r}, args: [{str(MCP_SERVER)!r}]}}
    - {{name: down, command: {sys.executable!r}, args: [{str(MCP_SERVER)!r}, --die],
       restart: {{max_attempts: 0}}}}
    - {{name: missing, command: /nonexistent/mcp-server, restart: {{max_attempts: 0}}}}
"""
    )
    result = await trio_agent(workspace, "run", "list", "files")
    assert result.returncode == 0, result.stderr.decode()
    reports = [
        line
        for line in result.stderr.decode().splitlines()
        if line.startswith("trio-agent: CONFIG: MCP server")
    ]
    assert [line.split(" did not start: ")[0] for line in reports] == [
        "trio-agent: CONFIG: MCP server 'down'",
        "trio-agent: CONFIG: MCP server 'missing'",
    ]
    assert "closed the connection before it listed its tools" in reports[0]
    assert "notes.txt" in result.stdout.decode()


async def test_the_config_file_in_use_is_protected(workspace: Path) -> None:
    (workspace / "agent.yml").write_text("tools: {root: .}\n")
    result = await trio_agent(workspace, "run", "-c", "agent.yml", "read", "agent.yml")
    assert "← error DENIED" in result.stderr.decode()
    assert "root: ." not in result.stdout.decode()


async def test_sessions_do_not_need_the_plugins(workspace: Path) -> None:
    (workspace / "f.yml").write_text("plugins: [{use: nowhere:Thing}]\n")
    result = await trio_agent(workspace, "sessions", "list", "-c", "f.yml")
    assert (result.returncode, result.stderr) == (0, b"no sessions\n")


async def test_plugins_checks_what_spans_entries(workspace: Path) -> None:
    (workspace / "f.yml").write_text("plugins: [{use: hello}, {use: hello, name: two}]\n")
    result = await trio_agent(workspace, "plugins", "-c", "f.yml")
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "trio-agent: CONFIG: f.yml: $.plugins[1]: plugin 'two' registers the provider 'echo', which "
        "$.plugins[0] already defines; rename one\n"
    )
