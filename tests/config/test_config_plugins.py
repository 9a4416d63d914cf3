"""Plugins from trio-agent.yml: by import path and by entry point, their configs, their providers,
and the built-in integration sections (``mcp:``) mounted through the same table."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import trio_agent.config
from trio_agent.agent import AgentRegistry
from trio_agent.config import (
    ConfigError,
    ConfiguredPlugin,
    HarnessConfig,
    PersistenceConfig,
    PluginEntry,
    configured_plugins,
    installed_plugins,
    mount_config,
    parse_config,
    resolve_plugins,
)
from trio_agent.persistence import SESSION_PERSISTENCE, MemoryPersistence
from trio_agent.runtime import Context, FiberState
from trio_agent.session import AssistantMessageEvent
from trio_agent.tools import ToolRegistry

#: A directory laid out like site-packages holding the test distribution trio-agent-hello.
SITE = Path(__file__).parents[1] / "plugin_dist"
MCP_SERVER = Path(__file__).parents[1] / "mcp" / "mcp_server.py"

BASE = "persistence: {type: memory}\ntools: {builtin: []}\n"


@pytest.fixture(autouse=True)
def hello_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """trio-agent-hello is installed: importable, and its entry points visible."""
    monkeypatch.syspath_prepend(str(SITE))


def parse(text: str) -> HarnessConfig:
    return parse_config(BASE + text, source="f.yml", environ={})


async def reply_of(ctx: Context, agent_id: str, prompt: str) -> str:
    with trio.fail_after(10):
        agent = await ctx.require(AgentRegistry).wait_for(agent_id)
        agent.send(prompt)
        await agent.wait_idle()
    (text,) = [
        e.payload_as(AssistantMessageEvent).message.text
        for e in agent.session.events
        if e.type == "assistant/message"
    ]
    return text


# --- by import path and by entry point ------------------------------------------------------


async def test_a_plugin_by_import_path_is_mounted_before_the_config_agents(ctx: Context) -> None:
    config = parse(
        """
plugins:
  - use: trio_agent_hello:AgentWitness
  - {use: "trio_agent_hello:EchoModel", config: {greeting: hi}}
  - use: trio_agent_hello:stamp_plugin
agents: [{id: a, provider: echo}]
"""
    )
    echo = config.plugins[1]
    assert echo.config == sys.modules["trio_agent_hello"].EchoModel.Config(greeting="hi")
    fibers = await mount_config(ctx, config)
    assert [f.name for f in fibers] == [
        "trio_agent_hello:AgentWitness",
        "trio_agent_hello:EchoModel",
        "trio_agent_hello:stamp_plugin",
    ]
    assert all(f.state is FiberState.ACTIVE for f in fibers)
    # Mounted before the loop: the witness saw the configured agent being created.
    assert fibers[0].instance.seen == ["a"]
    assert await reply_of(ctx, "a", "there") == "hi, there"
    assert "stamp" in [s.name for s in ctx.require(ToolRegistry).schemas()]


async def test_a_plugin_by_entry_point(ctx: Context) -> None:
    (hello,) = [ep for ep in installed_plugins() if ep.name == "hello"]
    assert hello.value == "trio_agent_hello:EchoModel"
    assert hello.dist is not None and (hello.dist.name, hello.dist.version) == (
        "trio-agent-hello",
        "0.1",
    )
    config = parse(
        """
plugins:
  - {use: hello, name: greeter, config: {provider: echo2, greeting: hey}}
llm:
  default_provider: echo2
"""
    )
    (fiber,) = await mount_config(ctx, config)
    assert (fiber.name, fiber.state) == ("greeter", FiberState.ACTIVE)
    agent = ctx.agent_loop.create("ad-hoc")
    agent.send("you")
    await agent.wait_idle()
    assert agent.options.provider is None  # the loop's default: the plugin's provider
    texts = [e.payload.message.text for e in agent.session.events if e.type == "assistant/message"]
    assert texts == ["hey, you"]


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        (
            "[{use: trio_agent_hello:stamp_plugin}, {use: hello, name: a},"
            " {use: hello, name: b, config: {timeout: soon}}]",
            r"^f\.yml: \$\.plugins\[2\]\.config\.timeout: expected a number$",
        ),
        (
            "[{use: hello, config: {greting: hi}}]",
            r"\$\.plugins\[0\]\.config: unknown key\(s\) greting",
        ),
        ("[{use: hello, config: 5}]", r"\$\.plugins\[0\]\.config: expected a mapping"),
        ("[{use: hello, nmae: x}]", r"\$\.plugins\[0\]: unknown key\(s\) nmae"),
        ("[{name: x}]", r"\$\.plugins\[0\]\.use: required key missing"),
        ("[{use: 5}]", r"\$\.plugins\[0\]\.use: expected a string, got 5"),
        ("{use: hello}", r"\$\.plugins: expected a list of plugin entries"),
        (
            "[{use: nowhere.module:Thing}]",
            r"\$\.plugins\[0\]: cannot import nowhere\.module:Thing: No module named 'nowhere'",
        ),
        (
            "[{use: trio_agent_hello:Nothing}]",
            r"\$\.plugins\[0\]: cannot import trio_agent_hello:Nothing: module "
            r"trio_agent_hello has no 'Nothing'",
        ),
        ("[{use: 'a b:c'}]", r"\$\.plugins\[0\]: 'a b:c' is not an import path"),
        (
            "[{use: trio_agent_hello:__doc__}]",
            r"\$\.plugins\[0\]: trio_agent_hello:__doc__ is a str, not a plugin",
        ),
        (
            "[{use: helo}]",
            r"\$\.plugins\[0\]: no installed plugin is called 'helo' \(the trio_agent\.plugins "
            r"entry points are: .*broken, hello.*\); install its distribution, or write an "
            r"import path",
        ),
        (
            "[{use: hello}, {use: hello}]",
            r"\$\.plugins\[1\]: the name 'hello' is already taken by \$\.plugins\[0\]",
        ),
        (
            "[{use: trio_agent_hello.needs_missing:Backend}]",
            r"\$\.plugins\[0\]: cannot import trio_agent_hello\.needs_missing:Backend: No "
            r"module named 'trio_agent_hello_missing_dependency'",
        ),
    ],
)
def test_bad_plugins_name_the_key_path(plugins: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(f"plugins: {plugins}\n")


async def test_a_plugin_that_fails_to_load_is_a_config_error_naming_it(ctx: Context) -> None:
    config = parse("plugins: [{use: trio_agent_hello:stamp_plugin}, {use: broken}]\n")
    with pytest.raises(ConfigError) as caught:
        await mount_config(ctx, config)
    assert str(caught.value) == (
        "$.plugins[1]: plugin 'broken' (broken) failed to load: RuntimeError: the broken "
        "plugin always fails"
    )
    assert isinstance(caught.value.__cause__, RuntimeError)


async def test_mount_errors_name_the_file(ctx: Context, tmp_path: Path) -> None:
    path = tmp_path / "agent.yml"
    path.write_text(BASE + "plugins: [{use: broken}]\n")
    with pytest.raises(ConfigError, match=rf"^{path}: \$\.plugins\[0\]: plugin 'broken'"):
        await mount_config(ctx, trio_agent.config.load_config(path))


async def test_a_programmatic_config_is_checked_when_mounted(ctx: Context) -> None:
    config = HarnessConfig(
        persistence=PersistenceConfig("memory"),
        plugins=(PluginEntry("hello", config={"timeout": "later"}),),
    )
    with pytest.raises(ConfigError, match=r"^\$\.plugins\[0\]\.config\.timeout: expected a number"):
        await mount_config(ctx, config)
    hello = sys.modules["trio_agent_hello"]
    config = HarnessConfig(
        persistence=PersistenceConfig("memory"),
        plugins=(PluginEntry("hello", config=hello.EchoModel.Config(greeting="yo")),),
    )
    (fiber,) = await mount_config(ctx, config)
    assert fiber.instance.adapter.name == "echo"


# --- providers from plugins -----------------------------------------------------------------


async def test_agents_name_providers_that_plugins_register(ctx: Context) -> None:
    config = parse(
        """
plugins:
  - use: hello
  - use: trio_agent_hello:fixed_model
agents:
  - {id: echoes, provider: echo}
  - {id: fixed, provider: fixed, model: m1}
  - {id: plain}
"""
    )
    assert [p.providers for p in resolve_plugins(config)] == [("echo",), ("fixed",)]
    await mount_config(ctx, config)
    assert await reply_of(ctx, "echoes", "ping") == "hello, ping"
    assert await reply_of(ctx, "fixed", "ping") == "fixed"
    agents = ctx.require(AgentRegistry)
    # No model named: a plugin's provider gets "default", for its adapter to interpret.
    models: dict[str, str | None] = {a.id: a.options.model for a in agents.list()}
    assert models["echoes"] == "default"
    assert models["fixed"] == "m1"
    assert models["plain"] == "offline"  # the default provider's model


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "plugins: [{use: hello}]\nagents: [{id: a, provider: ehco}]\n",
            r"\$\.agents\[0\]\.provider: 'ehco' is not a defined provider \(known: offline, echo\)",
        ),
        (
            "plugins: [{use: hello}]\nllm: {default_provider: ehco}\n",
            r"\$\.llm\.default_provider: 'ehco' is not a defined provider \(known: offline, echo\)",
        ),
        (
            "plugins: [{use: hello, config: {provider: offline}}]\n",
            r"\$\.plugins\[0\]: plugin 'hello' registers the provider 'offline', which "
            r"\$\.llm\.providers\[0\] already defines; rename one",
        ),
        (
            "plugins: [{use: hello}, {use: hello, name: again}]\n",
            r"\$\.plugins\[1\]: plugin 'again' registers the provider 'echo', which "
            r"\$\.plugins\[0\] already defines",
        ),
    ],
)
def test_the_provider_typo_check_knows_the_plugins_providers(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(text)


def test_default_provider_of_a_plugin_is_named_not_configured() -> None:
    config = parse("plugins: [{use: hello}]\nllm: {default_provider: echo}\n")
    assert config.default_provider_name == "echo"
    assert (config.default_model("echo"), config.default_model("offline")) == ("default", "offline")
    with pytest.raises(ConfigError, match=r"no llm\.providers entry is called 'echo'"):
        _ = config.default_provider


async def test_incomplete_plugins_are_reported(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    config = parse(
        "plugins: [{use: trio_agent_hello:waiting_plugin}, {use: trio_agent_hello:liar_model}]\n"
    )
    with caplog.at_level(logging.WARNING, logger="trio_agent.config"):
        waiting, liar = await mount_config(ctx, config)
    assert (waiting.state, liar.state) == (FiberState.PENDING, FiberState.ACTIVE)
    assert [r.getMessage() for r in caplog.records] == [
        "$.plugins[0]: plugin 'trio_agent_hello:waiting_plugin' (trio_agent_hello:waiting_plugin) "
        "waits for the service(s) weather, which no mounted plugin provides; it stays unloaded "
        "until one appears",
        "$.plugins[1]: plugin 'trio_agent_hello:liar_model' (trio_agent_hello:liar_model) "
        "declares the provider 'ghost' but did not register it; agents on it will fail with "
        "NO_ADAPTER",
    ]


# --- listing without importing --------------------------------------------------------------


def test_a_config_can_be_listed_without_importing_its_plugins() -> None:
    text = "plugins: [{use: nowhere:Thing, config: {x: 1}}, {use: hello}]\nagents: [{id: a, provider: echo}]\n"
    with pytest.raises(ConfigError, match="cannot import nowhere:Thing"):
        parse(text)
    config = parse_config(BASE + text, environ={}, import_plugins=False)
    assert config.plugins == (PluginEntry("nowhere:Thing", config={"x": 1}), PluginEntry("hello"))
    nowhere, hello = configured_plugins(config)
    assert nowhere == ConfiguredPlugin("$.plugins[0]", "nowhere:Thing", "nowhere:Thing", {"x": 1})
    with pytest.raises(ConfigError, match=r"^\$\.plugins\[0\]: cannot import"):
        nowhere.resolve()
    assert hello.resolve().providers == ("echo",)


# --- the built-in integration sections ------------------------------------------------------


def mcp_section(*servers: str, startup_timeout: float = 30) -> str:
    return f"mcp:\n  startup_timeout: {startup_timeout}\n  servers:\n" + "".join(
        f"    - {server}\n" for server in servers
    )


def test_the_mcp_section_is_the_mcp_plugins_config() -> None:
    from trio_agent.mcp import McpServersConfig, StdioServerConfig

    config = parse(mcp_section("{name: fs, command: npx, args: [-y, server], timeout: 5}"))
    assert config.integrations == {
        "mcp": McpServersConfig(
            servers=(StdioServerConfig(name="fs", command="npx", args=("-y", "server"), timeout=5),)
        )
    }
    (entry,) = configured_plugins(config)
    assert (entry.source, entry.name, entry.use, entry.section) == (
        "$.mcp",
        "mcp",
        "trio_agent.mcp:McpServers",
        "mcp",
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            mcp_section("{name: a, command: x}", "{name: b, command: x, timeout: -1}"),
            r"^f\.yml: \$\.mcp\.servers\[1\]\.timeout: got -1\.0; expected a positive",
        ),
        (mcp_section("{name: a, command: x, tiemout: 1}"), r"\$\.mcp\.servers\[0\]: unknown key"),
        ("mcp: [a]\n", r"\$\.mcp: got list; expected a mapping"),
        (
            "mcp: {}\nplugins: [{use: hello, name: mcp}]\n",
            r"\$\.plugins\[0\]: the name 'mcp' is already taken by \$\.mcp",
        ),
    ],
)
def test_bad_mcp_sections_name_the_key_path(section: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(section)


async def test_the_mcp_section_is_mounted_after_the_tools(ctx: Context) -> None:
    from trio_agent.mcp import McpServers

    config = parse(
        mcp_section(
            f"{{name: t, command: {sys.executable!r}, args: [{str(MCP_SERVER)!r}]}}",
            f"{{name: dead, command: {sys.executable!r}, args: [{str(MCP_SERVER)!r}, --die],"
            " restart: {max_attempts: 0}}",
        )
        + "plugins: [{use: hello}]\n"
    )
    with trio.fail_after(60):
        mcp, hello = await mount_config(ctx, config)
    assert (mcp.name, hello.name) == ("mcp", "hello")
    assert isinstance(mcp.instance, McpServers)
    assert {s.name: s.state for s in mcp.instance.servers()} == {"t": "up", "dead": "failed"}
    assert "t__echo" in [s.name for s in ctx.require(ToolRegistry).schemas()]


NO_MCP = """
import sys

class NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoMcp())
from trio_agent.config import ConfigError, parse_config
for text in ("plugins: []\\n", "mcp: {servers: []}\\n", "plugins: [{use: trio_agent.mcp:McpServers}]\\n"):
    try:
        parse_config(text, source="f.yml")
        print("ok")
    except ConfigError as exc:
        print(exc)
print(sorted(m for m in sys.modules if m.startswith("trio_agent.mcp")))
"""


def test_without_the_extra_the_mcp_section_says_how_to_install_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_MCP], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "ok",
        "f.yml: $.mcp: trio_agent.mcp:McpServers needs the 'mcp' extra, which is not installed "
        "(no module 'mcp'): pip install 'trio-agent[mcp]'",
        "f.yml: $.plugins[0]: cannot import trio_agent.mcp:McpServers: trio_agent.mcp needs the "
        "MCP SDK, which is not installed: pip install 'trio-agent[mcp]'",
        "[]",
    ]


async def test_an_integration_row_is_all_it_takes(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How a colleague adds ``subagents:``: one row in the table, and the section works."""
    rows = trio_agent.config._INTEGRATIONS
    monkeypatch.setitem(rows, "hello", trio_agent.config._Lazy("trio_agent_hello:EchoModel"))
    monkeypatch.setitem(
        rows,
        "needy",
        trio_agent.config._Lazy("trio_agent_hello.needs_missing:Backend", extra="needy"),
    )
    config = parse("hello: {greeting: howdy}\nagents: [{id: a, provider: echo}]\n")
    (fiber,) = await mount_config(ctx, config)
    assert fiber.name == "hello"
    assert await reply_of(ctx, "a", "partner") == "howdy, partner"
    with pytest.raises(ConfigError, match=r"\$\.hello\.timeout: expected a number"):
        parse("hello: {timeout: x}\n")
    with pytest.raises(
        ConfigError,
        match=r"\$\.needy: trio_agent_hello\.needs_missing:Backend needs the 'needy' extra, "
        r"which is not installed \(no module 'trio_agent_hello_missing_dependency'\): pip "
        r"install 'trio-agent\[needy\]'",
    ):
        parse("needy: {}\n")


def test_a_program_names_only_known_integrations() -> None:
    with pytest.raises(ConfigError, match="integrations: unknown section"):
        configured_plugins(HarnessConfig(integrations={"mpc": {}}))


# --- persistence: a tagged union on type ----------------------------------------------------


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("{type: jsonl, dsn: x}", r"\$\.persistence: unknown key\(s\) dsn"),
        ("{type: sqlite, path: 5.5, mode: wal}", r"\$\.persistence: unknown key\(s\) mode"),
        ("{type: none, path: x}", r"\$\.persistence: unknown key\(s\) path: type none takes"),
        ("{type: [jsonl]}", r"\$\.persistence: type \['jsonl'\] is not a persistence backend"),
        ("jsonl", r"\$\.persistence: expected a mapping with a type"),
    ],
)
def test_each_persistence_type_takes_its_backends_keys(section: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(f"persistence: {section}\n", environ={})


async def test_a_persistence_row_is_all_it_takes(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How the postgres backend is added: one row (lazily imported, with its extra)."""
    rows = trio_agent.config._PERSISTENCE_BACKENDS
    monkeypatch.setitem(
        rows, "scratch", trio_agent.config._Lazy("trio_agent.persistence:MemoryPersistence")
    )
    monkeypatch.setitem(
        rows,
        "postgres",
        trio_agent.config._Lazy("trio_agent_hello.needs_missing:Backend", extra="postgres"),
    )
    config = parse_config("persistence: {type: scratch}\ntools: {builtin: []}\n", environ={})
    assert config.persistence == PersistenceConfig("scratch", MemoryPersistence.Config())
    await mount_config(ctx, config)
    assert isinstance(ctx.require(SESSION_PERSISTENCE), MemoryPersistence)
    with pytest.raises(
        ConfigError,
        match=r"\$\.persistence: trio_agent_hello\.needs_missing:Backend needs the 'postgres' "
        r"extra, which is not installed .*pip install 'trio-agent\[postgres\]'",
    ):
        parse_config("persistence: {type: postgres, dsn: x}\n", environ={})


def test_the_subagents_section_is_the_subagent_services_config() -> None:
    from trio_agent.subagents import SubagentDefinition, SubagentsConfig

    config = parse(
        "subagents:\n  - {name: researcher, description: reads, instructions: Read carefully.}\n"
    )
    (section,) = config.integrations.values()
    assert isinstance(section, SubagentsConfig)
    assert section.definitions == (
        SubagentDefinition(name="researcher", description="reads", instructions="Read carefully."),
    )
    (entry,) = configured_plugins(config)
    assert (entry.source, entry.use) == ("$.subagents", "trio_agent.subagents:SubagentService")
    with pytest.raises(ConfigError, match=r"\$\.subagents\[0\]"):
        parse("subagents:\n  - {name: x, descripton: typo, instructions: y}\n")


async def test_the_subagents_section_mounts_ctx_subagents(ctx: Context) -> None:
    from trio_agent.subagents import SubagentService

    config = parse(
        "persistence: {type: memory}\n"
        "subagents:\n  - {name: helper, description: helps, instructions: Help.}\n"
    )
    with trio.fail_after(30):
        await mount_config(ctx, config)
    service = ctx.require(SubagentService)
    assert [d.name for d in service.list()] == ["helper"]
    assert ctx.require(ToolRegistry).get("subagent") is not None


async def test_compaction_and_otel_sections_mount_their_plugins(ctx: Context) -> None:
    from trio_agent.compaction import Compaction
    from trio_agent.usage import UsageService

    config = parse(
        "persistence: {type: memory}\n"
        "compaction: {threshold: 0.5, keep_turns: 2, strategy: prune}\n"
        "otel: {capture_content: false}\n"
    )
    with trio.fail_after(30):
        compaction, otel = await mount_config(ctx, config)
    assert (compaction.name, otel.name) == ("compaction", "otel")
    settings = ctx.require(Compaction).settings
    assert (settings.threshold, settings.keep_turns, settings.strategy) == (0.5, 2, "prune")
    assert ctx.get(UsageService) is not None


def test_a_bad_compaction_section_names_the_key_path() -> None:
    with pytest.raises(ConfigError, match=r"\$\.compaction"):
        parse("compaction: {threshold: 2}\n")
    with pytest.raises(ConfigError, match=r"\$\.compaction"):
        parse("compaction: {treshold: 0.5}\n")


def test_the_postgres_type_is_postgres_persistences_config() -> None:
    from trio_agent.persistence import PostgresPersistence

    config = parse_config(
        "persistence: {type: postgres, dsn: '${DATABASE_URL}', pool_size: 2}\n",
        environ={"DATABASE_URL": "postgresql://u:secret@127.0.0.1/db"},
    )
    assert config.persistence.type == "postgres"
    assert config.persistence.config == PostgresPersistence.Config(
        dsn="postgresql://u:secret@127.0.0.1/db", pool_size=2
    )
    with pytest.raises(ConfigError, match=r"\$\.persistence: unknown key\(s\) path"):
        parse_config("persistence: {type: postgres, dsn: x, path: y}\n", environ={})
