"""The client's ``mcpServers``, end to end: the official ACP client spawns the server, lists
real MCP servers (tests/mcp/mcp_server.py, on the SDK's ``MCPServer``) in ``session/new`` /
``session/load``, and the scripted model calls their tools.

Process tree: pytest (the asyncio ACP client) → the ACP server (acp_mcp_child.py) → the stdio
MCP server, found by the marker on its command line. The HTTP MCP server is the test's own
child.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, text_block
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer
from acp_helpers import (
    RecordingClient,
    kinds,
    of_type,
    processes_mentioning,
    read_log,
    run_client,
    spawn,
    stderr_text,
    write_config,
)

CHILD = str(Path(__file__).with_name("acp_mcp_child.py"))
MCP_SERVER = str(Path(__file__).parent.parent / "mcp" / "mcp_server.py")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work.resolve()


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def marker() -> Iterator[str]:
    """A token on the stdio MCP server's command line; whatever carries it is killed after the
    test, even when an assertion failed (and the test fails if something had to be)."""
    token = f"trio-agent-acp-mcp-{uuid.uuid4().hex}"
    yield token
    left = processes_mentioning(token)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], "an MCP server process outlived its test"


def child(scenario: str, config: Path) -> tuple[str, ...]:
    return (sys.executable, CHILD, scenario, "-c", str(config))


def results(updates: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Each finished call's (status, text), by call id."""
    done = {}
    for u in updates:
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed"):
            texts = [c["content"]["text"] for c in u.get("content", []) if c["type"] == "content"]
            done[u["toolCallId"]] = (u["status"], "".join(texts))
    return done


def reports(response: Any) -> list[dict[str, Any]]:
    """What the server said became of the client's MCP servers (the response's ``_meta``)."""
    meta = response.field_meta
    assert meta is not None, "the response has no _meta"
    found = meta["trio-agent"]["mcpServers"]
    assert isinstance(found, list)
    return found


def test_a_stdio_server_is_mounted_an_sse_one_reported_and_closing_the_session_stops_it(
    workspace: Path, sessions: Path, tmp_path: Path, marker: str
) -> None:
    config = write_config(tmp_path, provider="scripted", sessions=sessions)
    token = f"fs-token-{uuid.uuid4().hex}"
    sse_token = f"sse-token-{uuid.uuid4().hex}"
    servers: list[Any] = [
        McpServerStdio(
            name="fs",
            command=sys.executable,
            args=[MCP_SERVER, f"--marker={marker}"],
            env=[EnvVariable(name="FS_TOKEN", value=token)],
        ),
        SseMcpServer(
            type="sse",
            name="legacy",
            url="http://127.0.0.1:9/sse",
            headers=[HttpHeader(name="Authorization", value=f"Bearer {sse_token}")],
        ),
    ]

    async def conversation() -> dict[str, Any]:
        client = RecordingClient()
        seen: dict[str, Any] = {}
        async with spawn(client, *child("stdio", config)) as (conn, process):
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            seen["caps"] = init.agent_capabilities.mcp_capabilities
            new = await conn.new_session(cwd=str(workspace), mcp_servers=servers)
            seen["session_id"] = new.session_id
            seen["reports"] = reports(new)
            seen["running"] = processes_mentioning(marker)
            seen["response"] = await conn.prompt(
                session_id=new.session_id, prompt=[text_block("use the fs server")]
            )
            await conn.close_session(session_id=new.session_id)
            seen["after_close"] = processes_mentioning(marker)
            other = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            seen["other"] = other
        seen["updates"] = client.updates
        seen["status"] = process.returncode
        seen["stderr"] = stderr_text(process)
        return seen

    seen = run_client(conversation())

    assert (seen["caps"].http, seen["caps"].sse) == (True, False)
    fs, legacy = seen["reports"]
    assert (fs["name"], fs["state"]) == ("fs", "up")
    assert {"fs__echo", "fs__env"} <= set(fs["tools"])
    assert (legacy["name"], legacy["state"]) == ("legacy", "unsupported")
    assert "SSE" in legacy["error"]
    assert len(seen["running"]) == 1

    assert seen["response"].stop_reason == "end_turn"
    updates = seen["updates"]
    assert kinds(updates) == [
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "agent_message_chunk",
    ]
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert [(c["toolCallId"], c["rawInput"]) for c in calls] == [
        ("c1", {"text": "hello from mcp"}),
        ("c2", {"name": "FS_TOKEN"}),
    ]
    # The client's env reached the server, and the value is a secret: the result is masked.
    assert results(updates) == {
        "c1": ("completed", "hello from mcp"),
        "c2": ("completed", "[redacted]"),
    }

    assert seen["after_close"] == [], "session/close left the stdio MCP server running"
    assert seen["other"].field_meta is None  # no servers listed: nothing to report
    assert seen["status"] == 0
    stderr = seen["stderr"]
    assert "'legacy' is not mounted" in stderr and "SSE" in stderr
    log = (sessions / f"{seen['session_id']}.jsonl").read_text()
    for secret in (token, sse_token):
        assert secret not in stderr
        assert secret not in log
    events = read_log(sessions, seen["session_id"])
    assert [e["reason"] for e in of_type(events, "turn/end")] == ["completed"]


@contextlib.asynccontextmanager
async def http_mcp_server() -> AsyncIterator[str]:
    """The test MCP server over streamable HTTP on 127.0.0.1: its URL; killed afterwards."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, MCP_SERVER, "--http", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        line = await process.stdout.readline()
        assert line.startswith(b"PORT "), "the HTTP MCP server did not print its port"
        yield f"http://127.0.0.1:{int(line.removeprefix(b'PORT '))}/mcp"
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def test_an_http_server_gets_the_clients_headers_and_is_mounted_again_on_load(
    workspace: Path, sessions: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path, provider="scripted", sessions=sessions)
    token = f"http-token-{uuid.uuid4().hex}"

    async def conversation() -> dict[str, Any]:
        client = RecordingClient()
        seen: dict[str, Any] = {}
        async with http_mcp_server() as url:
            server = HttpMcpServer(
                type="http", name="web", url=url, headers=[HttpHeader(name="X-Token", value=token)]
            )
            async with spawn(client, *child("http", config)) as (conn, process):
                await conn.initialize(protocol_version=PROTOCOL_VERSION)
                new = await conn.new_session(cwd=str(workspace), mcp_servers=[server])
                session_id = seen["session_id"] = new.session_id
                seen["new"] = reports(new)
                seen["first"] = await conn.prompt(session_id=session_id, prompt=[text_block("one")])
                seen["first_updates"] = client.take()
                await conn.close_session(session_id=session_id)
                loaded = await conn.load_session(
                    cwd=str(workspace), session_id=session_id, mcp_servers=[server]
                )
                seen["loaded"] = reports(loaded)
                client.take()  # the replay
                seen["second"] = await conn.prompt(
                    session_id=session_id, prompt=[text_block("two")]
                )
                seen["second_updates"] = client.take()
            seen["status"] = process.returncode
            seen["stderr"] = stderr_text(process)
        return seen

    seen = run_client(conversation())

    for key in ("new", "loaded"):
        (web,) = seen[key]
        assert (web["name"], web["state"]) == ("web", "up")
        assert {"web__echo", "web__header"} <= set(web["tools"])
    assert seen["first"].stop_reason == seen["second"].stop_reason == "end_turn"
    # The header reached the server, and its value is a secret: the result is masked.
    assert results(seen["first_updates"]) == {"h1": ("completed", "[redacted]")}
    assert results(seen["second_updates"]) == {"h2": ("completed", "after load")}
    assert seen["status"] == 0
    assert token not in seen["stderr"]
    assert token not in (sessions / f"{seen['session_id']}.jsonl").read_text()
    events = read_log(sessions, seen["session_id"])
    assert [e["turn"] for e in of_type(events, "turn/start")] == [1, 2]


def test_without_the_mcp_extra_servers_are_reported_and_the_session_works(
    workspace: Path, sessions: Path, tmp_path: Path, marker: str
) -> None:
    config = write_config(tmp_path, provider="scripted", sessions=sessions)
    server = McpServerStdio(
        name="fs", command=sys.executable, args=[MCP_SERVER, f"--marker={marker}"], env=[]
    )

    async def conversation() -> dict[str, Any]:
        client = RecordingClient()
        seen: dict[str, Any] = {}
        async with spawn(client, *child("no-mcp", config)) as (conn, process):
            seen["init"] = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[server])
            seen["reports"] = reports(new)
            seen["running"] = processes_mentioning(marker)
            seen["response"] = await conn.prompt(
                session_id=new.session_id, prompt=[text_block("hi")]
            )
        seen["status"] = process.returncode
        seen["stderr"] = stderr_text(process)
        return seen

    seen = run_client(conversation())

    caps = seen["init"].agent_capabilities
    assert (caps.mcp_capabilities.http, caps.mcp_capabilities.sse) == (False, False)
    assert "not installed" in caps.field_meta["trio-agent"]["clientMcpServers"]
    assert seen["reports"] == [
        {"name": "fs", "state": "unavailable", "error": "the mcp extra is not installed"}
    ]
    assert seen["running"] == []
    assert seen["response"].stop_reason == "end_turn"
    assert seen["status"] == 0
    assert "pip install 'trio-agent[mcp]'" in seen["stderr"]


def test_importing_trio_agent_acp_does_not_import_the_sdk() -> None:
    """The SDK is imported when a client lists a server, not by ``trio_agent.acp``."""
    program = (
        "import sys\n"
        "import trio_agent.acp\n"
        "assert not [m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'trio_agent.mcp'))]\n"
        "print('clean')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "clean"), done.stderr
