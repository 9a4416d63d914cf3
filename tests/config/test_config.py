"""trio-agent.yml: parsing, ${VAR} expansion, errors with key paths, and open_harness."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest
import trio

import trio_agent.config
from trio_agent.agent import AgentRegistry
from trio_agent.config import (
    ConfigError,
    HarnessConfig,
    PersistenceConfig,
    default_config,
    load_config,
    open_harness,
    parse_config,
)
from trio_agent.llm import (
    LlmService,
    OfflineAdapter,
    OfflineProvider,
    OpenAiAdapter,
    OpenAiProvider,
    RetryPolicy,
    ScriptedAdapter,
    ScriptedProvider,
)
from trio_agent.loop import AgentConfig
from trio_agent.persistence import JsonlPersistence, SqlitePersistence
from trio_agent.session import AssistantMessageEvent


def test_empty_file_is_the_embedded_defaults() -> None:
    config = parse_config("")
    assert config == HarnessConfig()
    assert config.default_provider == OfflineProvider.Config(name="offline")
    assert config.persistence.type == "jsonl"
    assert config.tools.shell == "deny"


def test_full_config_structures() -> None:
    config = parse_config(
        """
llm:
  default_provider: deepseek
  providers:
    - {name: deepseek, type: openai, base_url: "https://api.deepseek.com",
       api_key_env: DEEPSEEK_API_KEY, models: [deepseek-chat]}
    - {name: offline, type: offline, delay: 0}
  retry: {max_attempts: 3}
persistence: {type: sqlite, path: sessions.db}
system_prompt: {persona: "Be brief."}
tools: {builtin: [read_file, grep], root: /tmp, shell: [git status, ls]}
agents:
  - {id: coder, provider: offline}
max_parallel_tool_calls: 4
""",
        environ={},
    )
    assert config.default_provider.models == ("deepseek-chat",)
    assert config.llm.retry is not None and config.llm.retry.max_attempts == 3
    assert config.persistence == PersistenceConfig(
        "sqlite", SqlitePersistence.Config("sessions.db")
    )
    assert config.tools.shell == ("git status", "ls")
    assert config.agents == (AgentConfig(id="coder", provider="offline"),)
    assert config.max_parallel_tool_calls == 4


def test_a_file_backend_can_be_told_to_write_in_a_worker_thread() -> None:
    config = parse_config("persistence: {type: jsonl, inline_when_idle: false}", environ={})
    assert config.persistence == PersistenceConfig(
        "jsonl", JsonlPersistence.Config(inline_when_idle=False)
    )


def test_environment_expansion() -> None:
    text = """
agents:
  - id: a
    resume_session_id: ${TRIO_AGENT_RESUME:-}
  - id: b
    model: ${MODEL}
system_prompt: {persona: "costs $${PRICE} dollars, model ${MODEL:-x}"}
"""
    config = parse_config(text, environ={"MODEL": "m1"})
    assert config.agents[0].resume_session_id == ""
    assert config.agents[1].model == "m1"
    assert config.system_prompt.persona == "costs ${PRICE} dollars, model m1"
    config = parse_config(text, environ={"MODEL": "m1", "TRIO_AGENT_RESUME": "s-1"})
    assert config.agents[0].resume_session_id == "s-1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'agents:\n  - {id: a, model: "${UNSET}"}\n',
            r"\$\.agents\[0\]\.model: environment variable UNSET is not set",
        ),
        (
            "llm:\n  providers:\n    - {name: x, type: openai, base_url: u, modelz: []}\n",
            r"\$\.llm\.providers\[0\]: unknown key\(s\) modelz",
        ),
        (
            "max_parallel_tool_calls: lots\n",
            r"\$\.max_parallel_tool_calls: expected a whole number",
        ),
        (
            "persistence: {type: mongo}\n",
            r"\$\.persistence: type 'mongo' is not a persistence backend; expected one of: "
            "jsonl, sqlite, memory, postgres, none",
        ),
        (
            "persistence: {type: postgres}\n",
            r"\$\.persistence\.dsn: required key missing",
        ),
        ("tools: {shell: sometimes}\n", r"\$\.tools\.shell: expected 'allow', 'deny'"),
        ("tools: {builtin: [read_file, telnet]}\n", r"unknown tool\(s\) telnet"),
        (
            "llm:\n  providers:\n    - {name: x, type: openai}\n",
            r"\$\.llm\.providers\[0\]\.base_url: required key missing",
        ),
        (
            "llm:\n  providers:\n    - {name: x, type: offline, base_url: u}\n",
            r"\$\.llm\.providers\[0\]: unknown key\(s\) base_url",
        ),
        (
            "llm: {default_provider: nope}\n",
            r"\$\.llm\.default_provider: 'nope' is not a defined provider \(known: offline\)",
        ),
        ("agents:\n  - {id: a}\n  - {id: a}\n", r"\$\.agents\[1\]\.id: agent 'a' is defined twice"),
        (
            "agents:\n  - {id: a, provider: ghost}\n",
            r"\$\.agents\[0\]\.provider: 'ghost' is not a defined provider \(known: offline\)",
        ),
        ("- just\n- a list\n", "the top level must be a mapping"),
        ("llm: [unclosed\n", "not valid YAML"),
        ("unknown_section: 1\n", r"\$: unknown key\(s\) unknown_section"),
        ("llm: {retry: 5}\n", r"\$\.llm\.retry: expected a mapping"),
        ("agents: [{id: a, max_tokens: many}]\n", r"\$\.agents\[0\]\.max_tokens: expected a whole"),
    ],
)
def test_bad_config_names_the_key_path(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(text, source="trio-agent.yml", environ={})


def test_load_config_reads_files_and_reports_missing_ones(tmp_path: Path) -> None:
    path = tmp_path / "trio-agent.yml"
    path.write_text("system_prompt: {persona: hi}\n")
    assert load_config(path).system_prompt.persona == "hi"
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(tmp_path / "missing.yml")


def test_default_config_says_which_provider_it_picked() -> None:
    config, note = default_config({})
    assert config.default_provider.type == "offline"
    assert "offline" in note
    config, note = default_config({"DEEPSEEK_API_KEY": "k", "OPENAI_API_KEY": "k"})
    assert config.default_provider.name == "deepseek"
    assert "DeepSeek" in note
    config, note = default_config({"OPENAI_API_KEY": "k"})
    assert isinstance(config.default_provider, OpenAiProvider.Config)
    assert config.default_provider.base_url == "https://api.openai.com/v1"
    assert "OpenAI" in note


async def test_open_harness_mounts_everything_and_runs_an_agent(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi there\n")
    config = parse_config(
        f"""
llm:
  providers: [{{name: offline, type: offline, delay: 0}}]
persistence: {{type: jsonl, path: "{tmp_path / "sessions"}"}}
tools: {{root: "{tmp_path}"}}
agents: [{{id: configured}}]
""",
        environ={},
    )
    async with open_harness(config) as ctx:
        for service in (
            "llm",
            "sessions",
            "session_persistence",
            "tools",
            "system_prompt",
            "agents",
            "agent_loop",
        ):
            assert ctx.get(service) is not None, service
        with trio.fail_after(5):
            agent = await ctx.agents.wait_for("configured")
        agent.send("read hello.txt")
        await agent.wait_idle()
        results = [e.payload.result.text for e in agent.session.events if e.type == "tool/result"]
        assert results == ["hi there\n"]
        session_id = agent.session.id
    assert (tmp_path / "sessions" / f"{session_id}.jsonl").exists()


async def test_resume_session_id_from_the_environment(tmp_path: Path) -> None:
    base = f"""
llm:
  providers: [{{name: offline, type: offline, delay: 0}}]
persistence: {{type: jsonl, path: "{tmp_path}"}}
tools: {{root: "{tmp_path}"}}
agents:
  - id: coder
    resume_session_id: ${{TRIO_AGENT_RESUME:-}}
"""
    async with open_harness(parse_config(base, environ={})) as ctx:
        with trio.fail_after(5):
            agent = await ctx.agents.wait_for("coder")
        agent.send("hello")
        await agent.wait_idle()
        first_id = agent.session.id
    async with open_harness(parse_config(base, environ={"TRIO_AGENT_RESUME": first_id})) as ctx:
        with trio.fail_after(5):
            agent = await ctx.agents.wait_for("coder")
        assert agent.session.id == first_id
        agent.send("again")
        await agent.wait_idle()
        assert [e.payload.turn for e in agent.session.events if e.type == "turn/start"] == [1, 2]


# --- providers as tagged unions -----------------------------------------------------------------

PROVIDERS = """
llm:
  providers:
    - {name: remote, type: openai, base_url: "http://127.0.0.1:9/v1", api_key_env: REMOTE_KEY,
       models: [big, small], idle_timeout: 20, headers: {x-team: blue}, retry: {max_attempts: 2}}
    - {name: offline, type: offline, delay: 0}
    - {name: canned, type: scripted, responses: [first, second], models: [canned-model]}
persistence: {type: memory}
tools: {builtin: []}
agents:
  - {id: on-remote}
  - {id: on-canned, provider: canned}
  - {id: pinned, provider: offline, model: mine}
"""


def test_each_provider_entry_is_its_plugins_config() -> None:
    remote, offline, canned = parse_config(PROVIDERS, environ={}).llm.providers
    assert remote == OpenAiProvider.Config(
        name="remote",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="REMOTE_KEY",
        models=("big", "small"),
        idle_timeout=20.0,
        headers={"x-team": "blue"},
        retry=RetryPolicy(max_attempts=2),
    )
    assert offline == OfflineProvider.Config(name="offline", delay=0.0)
    assert canned == ScriptedProvider.Config(
        name="canned", responses=("first", "second"), models=("canned-model",)
    )
    assert [p.type for p in (remote, offline, canned)] == ["openai", "offline", "scripted"]


def test_an_openai_entry_sends_no_key_unless_it_names_one() -> None:
    config = parse_config(
        "llm:\n  providers: [{name: local, type: openai, base_url: 'http://localhost:8000/v1'}]\n",
        environ={},
    )
    assert isinstance(config.default_provider, OpenAiProvider.Config)
    assert config.default_provider.api_key_env is None


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ("{name: x, type: openai, base_url: u, responses: [hi]}", "responses"),
        ("{name: x, type: openai, base_url: u, delay: 1}", "delay"),
        ("{name: x, type: offline, api_key_env: KEY}", "api_key_env"),
        ("{name: x, type: offline, idle_timeout: 5}", "idle_timeout"),
        ("{name: x, type: scripted, base_url: u}", "base_url"),
        ("{name: x, type: scripted, retry: {max_attempts: 2}}", "retry"),
    ],
)
def test_a_key_of_another_type_is_an_unknown_key(entry: str, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"\$\.llm\.providers\[1\]: unknown key\(s\) {key}$"):
        parse_config(
            f"llm:\n  providers:\n    - {{name: ok, type: offline}}\n    - {entry}\n", environ={}
        )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "{name: x, type: telepathy}",
            r"\$\.llm\.providers\[0\]: unknown type 'telepathy'; expected one of: offline, "
            "openai, scripted",
        ),
        ("{name: x}", r"\$\.llm\.providers\[0\]: .*expected one of: offline, openai, scripted"),
        (
            "just-a-name",
            r"\$\.llm\.providers\[0\]: expected an object with a 'type' tag, got str",
        ),
        (
            "{name: x, type: openai, base_url: u, idle_timeout: 0}",
            r"\$\.llm\.providers\[0\]: 'idle_timeout' must be > 0: 0\.0",
        ),
        (
            "{name: x, type: offline, delay: -1}",
            r"\$\.llm\.providers\[0\]: 'delay' must be >= 0: -1\.0",
        ),
        (
            "{name: x, type: openai, base_url: u, retry: {jitter: 3}}",
            r"\$\.llm\.providers\[0\]\.retry: .*jitter must be within \[0, 1\], got 3\.0",
        ),
    ],
)
def test_bad_provider_entries_name_the_problem_and_the_path(entry: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(f"llm:\n  providers:\n    - {entry}\n", environ={})


def test_retry_is_a_retry_policy() -> None:
    config = parse_config(
        "llm:\n  retry: {max_attempts: 3, initial_delay: 1, retry_codes: [SERVER]}\n", environ={}
    )
    assert config.llm.retry == RetryPolicy(
        max_attempts=3, initial_delay=1.0, retry_codes=("SERVER",)
    )
    with pytest.raises(
        ConfigError, match=r"\$\.llm\.retry: RetryPolicy\.max_attempts must be >= 1"
    ):
        parse_config("llm:\n  retry: {max_attempts: 0}\n", environ={})
    with pytest.raises(ConfigError, match=r"\$\.llm\.retry: unknown key\(s\) attempts"):
        parse_config("llm:\n  retry: {attempts: 2}\n", environ={})


async def test_mount_config_mounts_one_plugin_per_provider() -> None:
    async with open_harness(parse_config(PROVIDERS, environ={})) as ctx:
        llm = ctx.require(LlmService)
        assert llm.names() == ("remote", "offline", "canned")
        remote = llm.get("remote")
        assert isinstance(remote, OpenAiAdapter)
        assert (remote.base_url, remote.models, remote.idle_timeout) == (
            "http://127.0.0.1:9/v1",
            ("big", "small"),
            20.0,
        )
        assert llm.retry_policy("remote") == RetryPolicy(max_attempts=2)
        assert isinstance(llm.get("offline"), OfflineAdapter)
        assert isinstance(llm.get("canned"), ScriptedAdapter)
        agents = ctx.require(AgentRegistry)
        models = {
            agent_id: (agent.options.provider, agent.options.model)
            for agent_id in ("on-remote", "on-canned", "pinned")
            if (agent := agents.get(agent_id)) is not None
        }
        assert models == {
            "on-remote": (None, "big"),
            "on-canned": ("canned", "canned-model"),
            "pinned": ("offline", "mine"),
        }
        agent = agents.get("on-canned")
        assert agent is not None
        agent.send("hello")
        await agent.wait_idle()
        replies = [
            e.payload_as(AssistantMessageEvent).message.text
            for e in agent.session.events
            if e.type == "assistant/message"
        ]
        assert replies == ["first"]


def test_config_imports_only_public_surfaces() -> None:
    """config.py is a client of the packages below it: no ``llm._openai`` and friends (the one
    converter, ``trio_agent._serde``, is shared by design)."""
    tree = ast.parse(Path(trio_agent.config.__file__).read_text())
    private = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.level > 0
        and node.module is not None
        and any(part.startswith("_") for part in node.module.split("."))
    ]
    assert private == []


async def test_open_harness_sets_the_gc_threshold_while_open_only(tmp_path: Path) -> None:
    config = parse_config(
        f"persistence: {{type: jsonl, path: '{tmp_path / 's'}'}}\ntools: {{root: '{tmp_path}'}}\n",
        environ={},
    )
    before = gc.get_threshold()
    async with open_harness(config, gc_threshold=50_000):
        assert gc.get_threshold() == (50_000, *before[1:])
    assert gc.get_threshold() == before
    async with open_harness(config):
        assert gc.get_threshold() == before
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="gc_threshold must be a positive int"):
            async with open_harness(config, gc_threshold=bad):  # type: ignore[arg-type]
                pass
    assert gc.get_threshold() == before
