"""Helpers of the adversarial suite: the secret, the hostile-input count, file-system
snapshots and the tool call."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trio_agent.ids import CallId
from trio_agent.llm import ToolResult
from trio_agent.runtime import Context
from trio_agent.tools import ToolInvocation, ToolRegistry

#: The fake API key in the environment of every test here; it must never come back.
SECRET = "sk-test-9f8e7d6c5b4a39281706"
#: The provider's key variable (denied) and another secret-looking one (not listed).
KEY_ENV = "FAKE_PROVIDER_API_KEY"
OTHER_ENV = "SOME_SERVICE_TOKEN"
#: A file whose appearance proves that an attack ran code.
MARKER = "PWNED"

#: How many hostile inputs of each kind were defeated in this run.
TRIED: Counter[str] = Counter()


def tried(kind: str) -> None:
    """Count one hostile input of ``kind`` ("paths" or "shell commands") as defeated."""
    TRIED[kind] += 1


Snapshot = dict[str, tuple[str, str]]


def snapshot(top: Path, *, skip: Callable[[str], bool] = lambda _: False) -> Snapshot:
    """Every entry under ``top``: its kind and content hash (or link target), by path."""
    state: Snapshot = {}
    for directory, dirs, files in os.walk(top):
        for name in sorted(dirs + files):
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, top)
            if skip(relative):
                continue
            if os.path.islink(path):
                state[relative] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                state[relative] = ("dir", oct(os.stat(path).st_mode))
            else:
                state[relative] = ("file", hashlib.sha256(Path(path).read_bytes()).hexdigest())
    return state


def git(root: Path, *args: str) -> None:
    """Run git in ``root`` as the user would (not through the tools)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=env)


async def call(ctx: Context, name: str, **arguments: Any) -> ToolResult:
    """Execute ``name`` through the real pipeline with JSON ``arguments``."""
    return await ctx.require(ToolRegistry).execute(
        ToolInvocation(CallId(f"call-{name}"), name, json.dumps(arguments))
    )
