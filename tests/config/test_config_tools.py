"""The built-in tools' protection, filled from the config: the config file, the session store and
the harness's other files are protected; ``tools.protect``, ``tools.shell_env`` and
``tools.search_timeout`` reach the tools; API key variables never reach a shell command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trio_agent.config import ConfigError, load_config, mount_config, parse_config
from trio_agent.ids import CallId
from trio_agent.llm import ToolResult
from trio_agent.runtime import Context
from trio_agent.tools import ToolInvocation, ToolRegistry

SITE = Path(__file__).parents[1] / "plugin_dist"


async def call(ctx: Context, name: str, **arguments: object) -> ToolResult:
    return await ctx.require(ToolRegistry).execute(
        ToolInvocation(CallId(f"call-{name}"), name, json.dumps(arguments))
    )


async def denied(ctx: Context, path: str) -> bool:
    result = await call(ctx, "read_file", path=path)
    assert result.is_error, result.text
    return result.code == "DENIED"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("notes\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.txt").write_text("hunter2\n")
    return tmp_path


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
async def test_the_config_file_and_the_session_store_are_protected(
    ctx: Context, root: Path, store: str
) -> None:
    path = "db/sessions.sqlite3" if store == "sqlite" else "store"
    config_file = root / "agent.yml"
    config_file.write_text(
        f"persistence: {{type: {store}, path: {path}}}\ntools: {{protect: ['secrets/**']}}\n"
    )
    (root / "history.txt").write_text("old prompts\n")
    await mount_config(ctx, load_config(config_file), protect_paths=["history.txt"])
    agent = ctx.agent_loop.create("writer")
    agent.send("hello")
    await agent.wait_idle()
    stored = root / path
    assert stored.exists()
    if store == "sqlite":
        (root / "db" / "sessions.sqlite3-wal").write_text("")
        assert await denied(ctx, "db/sessions.sqlite3-wal")
        assert await denied(ctx, "db/sessions.sqlite3")
    else:
        (session_file,) = stored.glob("*.jsonl")
        assert await denied(ctx, f"store/{session_file.name}")
    assert await denied(ctx, "agent.yml")
    assert await denied(ctx, "history.txt")
    assert await denied(ctx, "secrets/key.txt")
    assert (await call(ctx, "read_file", path="notes.txt")).text == "notes\n"


async def test_the_default_store_is_protected(ctx: Context, root: Path) -> None:
    await mount_config(ctx, parse_config("", environ={}))
    agent = ctx.agent_loop.create("writer")
    agent.send("hello")
    await agent.wait_idle()
    (session_file,) = (root / ".trio-agent" / "sessions").glob("*.jsonl")
    assert await denied(ctx, f".trio-agent/sessions/{session_file.name}")


PROVIDER = (
    "llm:\n  providers:\n"
    "    - {name: remote, type: openai, base_url: 'http://127.0.0.1:9/v1', api_key_env: REMOTE_KEY}\n"
)


async def test_shell_env_passes_names_and_api_keys_never(
    ctx: Context, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "sk-secret")
    monkeypatch.setenv("PLUGIN_KEY", "pk-secret")
    monkeypatch.setenv("BUILD_MODE", "fast")
    monkeypatch.syspath_prepend(str(SITE))
    config = parse_config(
        PROVIDER
        + "plugins: [{use: hello, config: {api_key_env: PLUGIN_KEY}}]\n"
        + "persistence: {type: memory}\n"
        + "tools: {shell: allow, shell_env: [BUILD_MODE], approval: {allow: [shell]}}\n",
        environ={},
    )
    await mount_config(ctx, config)
    result = await call(
        ctx, "shell", command='echo "mode=$BUILD_MODE key=$REMOTE_KEY plugin=$PLUGIN_KEY"'
    )
    assert result.text.splitlines()[0] == "mode=fast key= plugin="


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            PROVIDER + "tools: {shell_env: [PATHEXT, REMOTE_KEY]}\n",
            r"^f\.yml: \$\.tools\.shell_env: REMOTE_KEY is the API key variable of provider "
            r"'remote'; shell commands never get API keys: remove it from shell_env$",
        ),
        (
            "plugins: [{use: hello, config: {api_key_env: PLUGIN_KEY}}]\n"
            "tools: {shell_env: [PLUGIN_KEY]}\n",
            r"\$\.tools\.shell_env: PLUGIN_KEY is the API key variable of provider 'echo'",
        ),
        ("tools: {shell_env: BUILD_MODE}\n", r"\$\.tools\.shell_env: expected a list of"),
        ("tools: {shell_env: ['A=B']}\n", r"\$\.tools\.shell_env: 'A=B' cannot be"),
        ("tools: {protect: ['../etc/**']}\n", r"\$\.tools\.protect\[0\]: '\.\./etc/\*\*' is not"),
        ("tools: {protect: secrets}\n", r"\$\.tools\.protect: expected a list of globs or paths"),
        (
            "tools: {search_timeout: 0}\n",
            r"\$\.tools\.search_timeout: got 0\.0; expected a positive",
        ),
        ("tools: {search_timeout: soon}\n", r"\$\.tools\.search_timeout: expected a number"),
        ("tools: {builtin: read_file}\n", r"\$\.tools\.builtin: expected a list of tool names"),
    ],
)
def test_bad_tools_settings_name_the_key_path(
    text: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SITE))
    with pytest.raises(ConfigError, match=message):
        parse_config(text, source="f.yml", environ={})


async def test_search_timeout_reaches_grep(ctx: Context, root: Path) -> None:
    config = parse_config(
        "persistence: {type: memory}\ntools: {search_timeout: 12.5, builtin: [grep]}\n",
        environ={},
    )
    await mount_config(ctx, config)
    (grep,) = ctx.require(ToolRegistry).schemas()
    assert "longer than 12.5 seconds is stopped" in grep.description
    result = await call(ctx, "grep", pattern="notes")
    assert result.text.startswith("notes.txt:1:"), result.text
