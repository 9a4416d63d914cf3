"""trio-agent.yml: parsing, ${VAR} expansion, errors with key paths, and open_harness."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from trio_agent.config import (
    ConfigError,
    HarnessConfig,
    ProviderConfig,
    default_config,
    load_config,
    open_harness,
    parse_config,
)
from trio_agent.loop import AgentConfig


def test_empty_file_is_the_embedded_defaults() -> None:
    config = parse_config("")
    assert config == HarnessConfig()
    assert config.default_provider == ProviderConfig(name="offline", type="offline")
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
    assert config.persistence.path == "sessions.db"
    assert config.tools.shell == ("git status", "ls")
    assert config.agents == (AgentConfig(id="coder", provider="offline"),)
    assert config.max_parallel_tool_calls == 4


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
            r"extra fields found \(modelz\) @ \$\.llm\.providers\[0\]",
        ),
        ("max_parallel_tool_calls: lots\n", r"expected int @ \$\.max_parallel_tool_calls"),
        ("persistence: {type: postgres}\n", r"\$\.persistence\.type"),
        ("tools: {shell: sometimes}\n", r"\$\.tools\.shell: expected 'allow', 'deny'"),
        ("tools: {builtin: [read_file, telnet]}\n", r"unknown tool\(s\) telnet"),
        (
            "llm:\n  providers:\n    - {name: x, type: openai}\n",
            r"base_url: required for type openai",
        ),
        (
            "llm:\n  providers:\n    - {name: x, type: offline, base_url: u}\n",
            r"base_url: only valid for type openai",
        ),
        ("llm: {default_provider: nope}\n", r"'nope' is not a defined provider"),
        ("agents:\n  - {id: a}\n  - {id: a}\n", r"\$\.agents\[1\]\.id: agent 'a' is defined twice"),
        ("agents:\n  - {id: a, provider: ghost}\n", r"\$\.agents\[0\]\.provider"),
        ("- just\n- a list\n", "the top level must be a mapping"),
        ("llm: [unclosed\n", "not valid YAML"),
        ("unknown_section: 1\n", r"extra fields found \(unknown_section\)"),
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
            while ctx.agents.get("configured") is None:
                await ctx.runtime.state_changed.wait()
        agent = ctx.agents.get("configured")
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
            while ctx.agents.get("coder") is None:
                await ctx.runtime.state_changed.wait()
        agent = ctx.agents.get("coder")
        agent.send("hello")
        await agent.wait_idle()
        first_id = agent.session.id
    async with open_harness(parse_config(base, environ={"TRIO_AGENT_RESUME": first_id})) as ctx:
        with trio.fail_after(5):
            while ctx.agents.get("coder") is None:
                await ctx.runtime.state_changed.wait()
        agent = ctx.agents.get("coder")
        assert agent.session.id == first_id
        agent.send("again")
        await agent.wait_idle()
        assert [e.payload.turn for e in agent.session.events if e.type == "turn/start"] == [1, 2]
