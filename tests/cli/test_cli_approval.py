"""#14 in the CLI and the config: ``tools.approval``, the policy mounted by ``mount_config`` in
library and CLI mode, and ``trio-agent run`` with and without ``--yes`` / ``--allow``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import trio

from trio_agent.config import ConfigError, HarnessConfig, ToolsConfig, mount_config, parse_config
from trio_agent.ids import CallId
from trio_agent.runtime import open_runtime
from trio_agent.tools import ApprovalRequest, Approved, Denied, ToolInvocation, ToolRegistry, tool

CLI = Path(sys.executable).parent / "trio-agent"


# --- the config key ---------------------------------------------------------------------------


def test_tools_approval_parses() -> None:
    config = parse_config(
        "tools:\n  approval: {default: deny, allow: [write_file], deny: [shell]}\n"
    )
    approval = config.tools.approval
    assert (approval.default, approval.allow, approval.deny) == (
        "deny",
        ("write_file",),
        ("shell",),
    )
    assert approval.mode == "library"
    assert parse_config("tools: {approval: {}}\n").tools.approval.default is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "tools: {approval: {default: maybe}}",
            "$.tools.approval.default: expected one of ask, allow, deny; got 'maybe'",
        ),
        ("tools: {approval: {allow: shell}}", "$.tools.approval.allow: expected a list of tool"),
        ("tools: {approval: {deny: [1]}}", "$.tools.approval.deny: expected a list of tool"),
        ("tools: {approval: {mode: cli}}", "$.tools.approval: unknown key(s) mode"),
        ("tools: {approval: yes}", "$.tools.approval: expected a mapping"),
    ],
)
def test_tools_approval_errors_name_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text + "\n")
    assert message in str(info.value)


# --- the policy mount_config mounts -----------------------------------------------------------

ran: list[str] = []


def _stand_in(name: str, read_only: bool = False) -> Any:
    async def body() -> str:
        ran.append(name)
        return name

    body.__name__ = name
    body.__doc__ = f"The {name} stand-in."
    return tool(name=name, read_only=read_only)(body)


@attrs.define
class _Service:
    asked: list[str] = attrs.Factory(list)

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        self.asked.append(request.tool)
        return Approved()


@pytest.mark.parametrize(
    ("mode", "name", "asked"),
    [
        ("library", "write_file", True),
        ("library", "edit_file", True),
        ("library", "shell", True),
        ("library", "custom", False),
        ("library", "peek", False),
        ("cli", "write_file", True),
        ("cli", "edit_file", True),
        ("cli", "shell", True),
        ("cli", "custom", True),
        ("cli", "peek", False),
    ],
)
async def test_mount_config_pinned_defaults(
    tmp_path: Path, mode: Literal["library", "cli"], name: str, asked: bool
) -> None:
    ran.clear()
    config = HarnessConfig(tools=ToolsConfig(builtin=(), root=str(tmp_path)))
    config = attrs.evolve(
        config, persistence=parse_config("persistence: {type: memory}\n").persistence
    )
    async with open_runtime() as ctx:
        await mount_config(ctx, config, approval_mode=mode)
        tools = ctx.require(ToolRegistry)
        for stand_in in ("write_file", "edit_file", "shell", "custom"):
            tools.register(_stand_in(stand_in))
        tools.register(_stand_in("peek", read_only=True))
        service = _Service()
        ctx.provide("approval", service)
        result = await tools.execute(ToolInvocation(CallId("c1"), name, "{}"))
        assert result.code is None
        assert service.asked == ([name] if asked else [])
        assert ran == [name]


async def test_mount_config_without_a_service_denies_with_how_to_allow(tmp_path: Path) -> None:
    ran.clear()
    config = HarnessConfig(tools=ToolsConfig(builtin=(), root=str(tmp_path)))
    config = attrs.evolve(
        config, persistence=parse_config("persistence: {type: memory}\n").persistence
    )
    async with open_runtime() as ctx:
        await mount_config(ctx, config)
        tools = ctx.require(ToolRegistry)
        tools.register(_stand_in("shell"))
        result = await tools.execute(ToolInvocation(CallId("c1"), "shell", "{}"))
        assert result.code is not None and "--allow" in result.text
        assert ran == []


# --- trio-agent run ---------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def _run(workspace: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    (workspace / "trio-agent.yml").write_text("persistence: {type: memory}\n")
    with trio.fail_after(60):
        return await trio.run_process(
            [str(CLI), "run", *args, "write out.txt: hello"],
            cwd=workspace,
            env=_env(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_run_denies_what_would_be_asked(tmp_path: Path) -> None:
    done = await _run(tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert not (tmp_path / "out.txt").exists()
    denied = [line for line in err.splitlines() if line.startswith("trio-agent: denied ")]
    assert len(denied) == 1, err
    assert denied[0].startswith("trio-agent: denied write_file (")
    assert "--yes or --allow write_file" in denied[0]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "flags", [("--yes",), ("--allow", "write_file"), ("--allow", "shell,write_file")]
)
async def test_run_with_yes_or_allow_runs_it(tmp_path: Path, flags: tuple[str, ...]) -> None:
    done = await _run(tmp_path, *flags)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert (tmp_path / "out.txt").read_text() == "hello"
    assert "trio-agent: denied" not in err


async def test_run_allow_of_another_tool_still_denies(tmp_path: Path) -> None:
    done = await _run(tmp_path, "--allow", "shell")
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert not (tmp_path / "out.txt").exists()
    assert "trio-agent: denied write_file (" in err
