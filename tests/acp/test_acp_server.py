"""``serve()`` in-process, over memory streams: message shapes, ownership, teardown.

The official SDK's pydantic models check every message we send: a message must validate *and*
survive a round trip unchanged (the SDK's models silently drop invalid optional fields, so
validation alone would hide a wrong field).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from acp import schema
from acp_rawclient import RawClient
from pydantic import BaseModel

from trio_agent.acp import AcpOptions, serve
from trio_agent.agent import AgentRegistry
from trio_agent.config import HarnessConfig, LlmConfig, PersistenceConfig
from trio_agent.llm import LlmService, Usage
from trio_agent.persistence import SESSION_PERSISTENCE
from trio_agent.redaction import Redactor
from trio_agent.runtime import Context
from trio_agent.testing import ScriptedAdapter, ScriptedProvider, hang, reasoning, text, tool_call
from trio_agent.tools import Ask

CONFIG = HarnessConfig(
    llm=LlmConfig(providers=(ScriptedProvider.Config(),)),
    persistence=PersistenceConfig(type="memory"),
)


def same_after_round_trip(model: type[BaseModel], data: Any) -> None:
    """``data`` validates as ``model`` and every field we sent survives unchanged (the model
    may add its defaults)."""
    dumped = model.model_validate(data).model_dump(by_alias=True, exclude_none=True, mode="json")
    _assert_kept(dumped, data, model.__name__)


def _assert_kept(dumped: Any, sent: Any, path: str) -> None:
    if isinstance(sent, dict):
        assert isinstance(dumped, dict), path
        for key, value in sent.items():
            if value is not None:
                assert key in dumped, f"{path}.{key} was dropped by the schema"
                _assert_kept(dumped[key], value, f"{path}.{key}")
    elif isinstance(sent, list):
        assert isinstance(dumped, list) and len(dumped) == len(sent), path
        for i, (d, v) in enumerate(zip(dumped, sent, strict=True)):
            _assert_kept(d, v, f"{path}[{i}]")
    else:
        assert dumped == sent, f"{path}: {sent!r} became {dumped!r}"


class Server:
    """A running ``serve()`` and the context its ``setup`` saw."""

    ctx: Context
    client: RawClient
    shutdown: trio.Event


@contextlib.asynccontextmanager
async def open_server(
    prepare: Callable[[Context], Awaitable[None]] | None = None,
    *,
    config: HarnessConfig = CONFIG,
) -> AsyncIterator[Server]:
    server = Server()
    server.shutdown = trio.Event()
    to_server, from_client = trio.testing.memory_stream_one_way_pair()
    to_client, from_server = trio.testing.memory_stream_one_way_pair()

    async def setup(ctx: Context) -> None:
        server.ctx = ctx
        if prepare is not None:
            await prepare(ctx)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve(
                config,
                from_client,
                to_client,
                options=AcpOptions(context_window=1000),
                setup=setup,
                shutdown=server.shutdown,
            )
        )
        server.client = RawClient(to_server, from_server)
        yield server
        await to_server.aclose()


def script(*responses: Any) -> Callable[[Context], Awaitable[None]]:
    async def prepare(ctx: Context) -> None:
        adapter = ctx.require(LlmService).get("scripted")
        assert isinstance(adapter, ScriptedAdapter)
        adapter.push(*responses)

    return prepare


async def start(client: RawClient, cwd: Path) -> str:
    init = await client.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    same_after_round_trip(schema.InitializeResponse, init)
    new = await client.result("session/new", {"cwd": str(cwd), "mcpServers": []})
    same_after_round_trip(schema.NewSessionResponse, new)
    return str(new["sessionId"])


async def test_every_message_matches_the_acp_schema(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    responses = (
        reasoning("hmm") + text("Looking.") + tool_call("r1", "read_file", {"path": "a.txt"}),
        tool_call("w1", "write_file", {"path": "b.txt", "content": "beta\n"}),
        tool_call("e1", "edit_file", {"path": "b.txt", "old": "beta", "new": "gamma"}),
        tool_call("x1", "no_such_tool", "not json"),
        text("Done.").with_usage(Usage(10, 5, cache_read_tokens=2)),
    )

    async def prepare(ctx: Context) -> None:
        await script(*responses)(ctx)

        async def ask_for_writes(execution: Any, next: Any) -> Any:
            return Ask("writes") if execution.name == "write_file" else await next()

        ctx.on("tools/pre-execute", ask_for_writes)

    with trio.fail_after(20):
        async with open_server(prepare) as server:
            client = server.client
            client.answer = lambda request: {
                "outcome": {"outcome": "selected", "optionId": "allow_once"}
            }
            session_id = await start(client, tmp_path)
            result = await client.result(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
            )
            same_after_round_trip(schema.PromptResponse, result)
            listed = await client.result("session/list", {})
            same_after_round_trip(schema.ListSessionsResponse, listed)

    assert result["stopReason"] == "end_turn"
    assert result["usage"]["inputTokens"] == 12 and result["usage"]["totalTokens"] == 17
    for notification in client.notifications:
        assert notification["method"] == "session/update"
        same_after_round_trip(schema.SessionNotification, notification["params"])
    # #14: write_file (the test's own Ask) and edit_file (the pinned default) are asked about.
    assert len(client.requests) == 2
    for permission in client.requests:
        same_after_round_trip(schema.RequestPermissionRequest, permission["params"])
    updates = client.updates(session_id)
    finished = {u["toolCallId"]: u for u in updates if u.get("status") in ("completed", "failed")}
    assert finished["r1"]["status"] == "completed"
    assert finished["w1"]["content"][0] == {
        "type": "diff",
        "path": str(await trio.Path(tmp_path).resolve() / "b.txt"),
        "oldText": None,
        "newText": "beta\n",
    }
    assert finished["e1"]["content"][0]["oldText"] == "beta\n"
    assert finished["e1"]["content"][0]["newText"] == "gamma\n"
    assert finished["x1"]["status"] == "failed"
    started = {u["toolCallId"]: u for u in updates if u["sessionUpdate"] == "tool_call"}
    assert started["x1"]["rawInput"] == {"arguments": "not json"}
    assert (started["x1"]["kind"], started["x1"]["title"]) == ("other", "no_such_tool")
    assert updates[-1] == {"sessionUpdate": "usage_update", "used": 17, "size": 1000}


async def test_session_close_tears_the_agent_down_and_answers_the_running_prompt(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        async with open_server(script(hang("partial"))) as server:
            client = server.client
            session_id = await start(client, tmp_path)
            registry = server.ctx.require(AgentRegistry)
            assert registry.ids() == (session_id,)
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]},
                }
            )
            while not client.updates(session_id):
                client.notifications.append(await client.next_frame())  # type: ignore[arg-type]
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/close",
                    "params": {"sessionId": session_id},
                }
            )
            answers = {a["id"]: a for a in [await client.response(), await client.response()]}
            assert answers[1]["result"] == {"stopReason": "cancelled"}
            assert answers[2]["result"] == {}
            assert registry.ids() == ()
            stored = await server.ctx.require(SESSION_PERSISTENCE).load(session_id)
            assert [e.data["reason"] for e in stored.events if e.type == "turn/end"] == ["disposed"]
            again = await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]},
            )
            assert again["error"]["code"] == -32002


async def test_shutdown_answers_the_pending_prompt_and_closes_the_output(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with open_server(script(hang())) as server:
            client = server.client
            session_id = await start(client, tmp_path)
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]},
                }
            )
            await trio.testing.wait_all_tasks_blocked()
            server.shutdown.set()
            answer = await client.response()
            assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "cancelled"}}
            assert await client.next_frame() is None


async def test_load_replays_history_and_refuses_a_second_open(tmp_path: Path) -> None:
    responses = (reasoning("ponder") + text("first answer"), text("second answer"))
    with trio.fail_after(20):
        async with open_server(script(*responses)) as server:
            client = server.client
            session_id = await start(client, tmp_path)
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "one"}]}
            assert (await client.result("session/prompt", prompt))["stopReason"] == "end_turn"
            load = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            busy = await client.call("session/load", load)
            assert busy["error"]["code"] == -32600
            assert await client.result("session/close", {"sessionId": session_id}) == {}
            client.notifications.clear()
            same_after_round_trip(
                schema.LoadSessionResponse, await client.result("session/load", load)
            )
            replayed = client.updates(session_id)
            assert [(u["sessionUpdate"], u["content"]["text"]) for u in replayed] == [
                ("user_message_chunk", "one"),
                ("agent_thought_chunk", "ponder"),
                ("agent_message_chunk", "first answer"),
            ]
            prompt["prompt"] = [{"type": "text", "text": "two"}]
            assert (await client.result("session/prompt", prompt))["stopReason"] == "end_turn"
            agent = server.ctx.require(AgentRegistry).get(session_id)
            assert agent is not None
            turns = [e.data["turn"] for e in agent.session.events if e.type == "turn/start"]
            assert turns == [1, 2]


async def test_client_mcp_servers_are_mounted_or_reported_and_their_secrets_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers = [
        {
            "name": "files",
            "command": "/bin/true",
            "args": ["-x"],
            "env": [{"name": "K", "value": "s3cret"}],
        },
        {"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp", "headers": []},
        {
            "type": "sse",
            "name": "old",
            "url": "http://127.0.0.1:9/sse",
            "headers": [{"name": "Authorization", "value": "Bearer sse-s3cret"}],
        },
        {
            "name": "bad env",
            "command": "/bin/true",
            "env": [{"name": "NOT A NAME", "value": "v4lue"}],
        },
        # not a trio-agent server name, and then a clash: mounted as my_files and files_2
        {"name": "my files", "command": "/bin/true"},
        {"name": "files", "command": "/bin/true"},
    ]
    caplog.set_level(logging.INFO, "trio_agent.acp")
    with trio.fail_after(20):
        async with open_server() as server:
            client = server.client
            await client.result("initialize", {"protocolVersion": 1})
            new = await client.result("session/new", {"cwd": str(tmp_path), "mcpServers": servers})
            same_after_round_trip(schema.NewSessionResponse, new)
            agent = server.ctx.require(AgentRegistry).get(new["sessionId"])
            assert agent is not None
            assert "s3cret" not in repr(agent.session.header)
            secrets = server.ctx.require(Redactor).secrets
            assert {"s3cret", "Bearer sse-s3cret", "v4lue"} <= secrets
    files, web, old, bad, spaced, again = new["_meta"]["trio-agent"]["mcpServers"]
    # /bin/true exits at once and nothing listens on port 9: both keep trying in the background
    down = ("restarting", "failed")
    assert (files["name"], files["state"] in down) == ("files", True)
    assert (web["name"], web["state"] in down) == ("web", True)
    assert "127.0.0.1:9" in web["error"]
    assert (old["name"], old["state"]) == ("old", "unsupported")
    assert (bad["name"], bad["state"]) == ("bad env", "invalid")
    assert "'NOT A NAME' is not an environment variable name" in bad["error"]
    assert [(r["name"], r["state"] in down) for r in (spaced, again)] == [
        ("my files", True),
        ("files", True),
    ]
    assert "MCP server 'my files' is mounted as 'my_files'" in caplog.text
    assert "MCP server 'files' is mounted as 'files_2'" in caplog.text
    assert "MCP server 'old' is not mounted" in caplog.text
    for secret in ("s3cret", "v4lue"):
        assert secret not in caplog.text
        assert secret not in str(new)


async def test_a_cwd_outside_the_configured_root_is_refused(tmp_path: Path) -> None:
    inside = tmp_path / "root" / "project"
    inside.mkdir(parents=True)
    config = HarnessConfig(
        llm=CONFIG.llm, persistence=CONFIG.persistence, tools=attrs_evolve_root(tmp_path / "root")
    )
    with trio.fail_after(20):
        async with open_server(config=config) as server:
            client = server.client
            await client.result("initialize", {"protocolVersion": 1})
            ok = await client.call("session/new", {"cwd": str(inside), "mcpServers": []})
            assert "result" in ok
            outside = await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            assert outside["error"]["code"] == -32602
            assert "outside the configured workspace root" in outside["error"]["message"]


def attrs_evolve_root(root: Path) -> Any:
    import attrs

    from trio_agent.config import ToolsConfig

    return attrs.evolve(ToolsConfig(), root=str(root))
