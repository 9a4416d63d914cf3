"""The adversarial suite's fixtures: a realistic workspace full of things worth attacking,
and the count of hostile inputs tried (printed at the end of the run).

No approval plugin is mounted, so every call reaches the tool: what is tested is the tools'
own protection, not a gate in front of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from security_helpers import KEY_ENV, OTHER_ENV, SECRET, TRIED, git

from trio_agent.runtime import Context
from trio_agent.tools import ToolRegistry
from trio_agent.tools.builtin import BuiltinTools


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TRIED:
        counted = ", ".join(f"{n} hostile {kind}" for kind, n in sorted(TRIED.items()))
        terminalreporter.write_line(f"security suite: {counted}, each DENIED or harmless")


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    monkeypatch.setenv(OTHER_ENV, SECRET)
    monkeypatch.setenv("HOME", str(tmp_path))  # git's global config: none of the user's
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A session store configured outside the workspace."""
    path = tmp_path / "elsewhere" / "sessions"
    path.mkdir(parents=True)
    (path / "other.jsonl").write_text('{"header": true}\n')
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A git repository with the harness's files, configured stores and secrets in it."""
    root = tmp_path / "ws"
    root.mkdir()
    files = {
        "src/app.py": "print('app')\n",
        "tests/test_app.py": "def test_app():\n    assert True\n",
        "tests/conftest.py": "# fixtures\n",
        "trio-agent.yml": "tools: {shell: deny}\n",
        ".trio-agent/sessions/s1.jsonl": '{"header": true}\n',
        "conf/agent.yml": "llm: {}\n",
        "store/s2.jsonl": '{"header": true}\n',
        "db/sessions.sqlite3": "not really sqlite\n",
        "history.txt": "previous prompt\n",
        "secrets/key.pem": "-----BEGIN KEY-----\n",
        "deep/a/b/c.pem": "-----BEGIN KEY-----\n",
        "evil.yml": "tools: {shell: allow}\n",
    }
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    git(root, "init", "-q", "-b", "main", ".")
    git(root, "add", "src", "tests")
    git(root, "commit", "-q", "-m", "initial")
    (root / "innocent").symlink_to(".git/config")
    (root / "dirlink").symlink_to(".git")
    (root / "cfglink").symlink_to("trio-agent.yml")
    (root / "dangling").symlink_to(".trio-agent/sessions/new.jsonl")
    (root / "sessions-link").symlink_to(".trio-agent/sessions")
    os.link(root / ".trio-agent/sessions/s1.jsonl", root / "hard.txt")
    return root


@pytest.fixture
def protect_config(root: Path, outside: Path) -> dict[str, Any]:
    """The BuiltinTools config the CLI would give for this workspace."""
    return {
        "root": str(root),
        "protect_paths": [
            str(root / "conf" / "agent.yml"),  # the config file in use (-c)
            str(root / "store"),  # a configured jsonl session store
            str(root / "db" / "sessions.sqlite3"),  # a sqlite one
            str(root / "history.txt"),  # the chat history file
            str(outside),
        ],
        "protect": ["secrets/**", "**/*.pem"],
        "shell_env_deny": [KEY_ENV],
    }


@pytest.fixture
async def tools(ctx: Context, protect_config: dict[str, Any]) -> Callable[..., Any]:
    """``await tools(**overrides)`` mounts the registry and BuiltinTools with the protected
    config (plus overrides)."""
    await ctx.plugin(ToolRegistry)

    async def mount(**overrides: Any) -> None:
        await ctx.plugin(BuiltinTools, {**protect_config, **overrides})

    return mount
