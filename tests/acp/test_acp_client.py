"""End to end with the official ACP client (``agent-client-protocol``, asyncio).

Every test spawns a real server process - ``trio-agent acp -c FILE``, or ``acp_child.py``
(the same ``main_acp`` with a scripted model and test plugins) - with the client's own trimmed
environment and a stderr pipe it never reads, exactly as an editor does.
"""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.schema import EnvVariable, McpServerStdio
from acp_helpers import (
    CHILD,
    TRIO_AGENT,
    RecordingClient,
    joined,
    kinds,
    of_type,
    processes_mentioning,
    read_log,
    run_client,
    spawn,
    stderr_text,
    write_config,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hello notes\n")
    return work.resolve()


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture(autouse=True)
def _no_unparsable_output(caplog: pytest.LogCaptureFixture) -> Any:
    """The SDK logs every stdout line it cannot parse: there must be none."""
    caplog.set_level(logging.ERROR)
    yield
    bad = [r for r in caplog.records if "parsing JSON-RPC" in r.getMessage()]
    assert not bad, "the server wrote something that is not a protocol message to stdout"


def child(scenario: str, config: Path) -> tuple[str, ...]:
    import sys

    return (sys.executable, CHILD, scenario, "-c", str(config))


def test_prompt_streams_text_and_calls_a_tool_then_load_continues_in_a_new_process(
    workspace: Path, sessions: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path, provider="offline", sessions=sessions)
    secret_server = McpServerStdio(
        name="fs",
        command="/bin/true",
        args=[],
        env=[EnvVariable(name="TOKEN", value="secret-token-123")],
    )

    async def first() -> tuple[str, Any, list[dict[str, Any]], int | None]:
        client = RecordingClient()
        async with spawn(client, TRIO_AGENT, "acp", "-c", str(config)) as (
            conn,
            process,
        ):
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[secret_server])
            response = await conn.prompt(
                session_id=new.session_id, prompt=[text_block("read notes.txt")]
            )
        return new.session_id, (init, response), client.updates, process.returncode

    session_id, (init, response), updates, status = run_client(first())

    caps = init.agent_capabilities
    assert init.protocol_version == 1
    assert caps.load_session is True
    assert (caps.prompt_capabilities.image, caps.prompt_capabilities.audio) == (True, False)
    assert caps.prompt_capabilities.embedded_context is True
    assert (caps.mcp_capabilities.http, caps.mcp_capabilities.sse) == (True, False)
    assert caps.session_capabilities.list is not None
    assert caps.session_capabilities.close is not None

    assert response.stop_reason == "end_turn"
    assert response.usage is not None and response.usage.output_tokens > 0
    assert kinds(updates) == [
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "agent_message_chunk",
        "usage_update",
    ]
    call, running, done = (u for u in updates if u["sessionUpdate"].startswith("tool_call"))
    assert call["toolCallId"] == running["toolCallId"] == done["toolCallId"]
    assert (call["kind"], call["title"], call["status"]) == ("read", "Read notes.txt", "pending")
    assert call["locations"] == [{"path": str(workspace / "notes.txt")}]
    assert call["rawInput"] == {"path": "notes.txt"}
    assert running["status"] == "in_progress"
    assert done["status"] == "completed"
    assert done["content"] == [
        {"type": "content", "content": {"type": "text", "text": "hello notes\n"}}
    ]
    text = joined(updates, "agent_message_chunk")
    assert text.startswith("Reading `notes.txt`.")
    assert "hello notes" in text.split("Reading `notes.txt`.", 1)[1]
    assert updates[-1]["size"] == 128_000 and updates[-1]["used"] > 0
    assert status == 0

    log = (sessions / f"{session_id}.jsonl").read_text()
    assert "secret-token-123" not in log

    async def second() -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any, Any, int | None]:
        client = RecordingClient()
        async with spawn(client, TRIO_AGENT, "acp", "-c", str(config)) as (
            conn,
            process,
        ):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            await conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
            replayed = client.take()
            response = await conn.prompt(session_id=session_id, prompt=[text_block("hello")])
            listed = await conn.list_sessions()
        return replayed, client.updates, response, listed, process.returncode

    replayed, live, response, listed, status = run_client(second())

    assert kinds(replayed) == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert joined(replayed, "user_message_chunk") == "read notes.txt"
    assert joined(replayed, "agent_message_chunk") == text
    replayed_done = replayed[3]
    assert (replayed_done["toolCallId"], replayed_done["status"]) == (
        call["toolCallId"],
        "completed",
    )
    assert response.stop_reason == "end_turn"
    assert joined(live, "agent_message_chunk").startswith("Hello!")
    assert [(s.session_id, s.cwd) for s in listed.sessions] == [(session_id, str(workspace))]
    assert status == 0

    events = read_log(sessions, session_id)
    assert [e["turn"] for e in of_type(events, "turn/start")] == [1, 2]
    assert [e["reason"] for e in of_type(events, "turn/end")] == ["completed", "completed"]


def test_cancel_mid_stream_answers_cancelled_and_leaves_a_balanced_log(
    workspace: Path, sessions: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path, provider="scripted", sessions=sessions)

    async def conversation() -> tuple[str, list[Any], list[dict[str, Any]], int | None]:
        client = RecordingClient()
        responses = []
        async with spawn(client, *child("hanging", config)) as (conn, process):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            for _ in range(2):
                chunk = client.seen("agent_message_chunk")
                chunk.clear()
                prompt = asyncio.ensure_future(
                    conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
                )
                await chunk.wait()
                await conn.cancel(session_id=new.session_id)
                responses.append(await prompt)
        return new.session_id, responses, client.updates, process.returncode

    session_id, responses, updates, status = run_client(conversation())

    assert [r.stop_reason for r in responses] == ["cancelled", "cancelled"]
    assert "usage_update" not in kinds(updates)
    assert status == 0
    events = read_log(sessions, session_id)
    assert [e["reason"] for e in of_type(events, "turn/end")] == ["aborted", "aborted"]
    messages = of_type(events, "assistant/message")
    assert [m["interrupted"] for m in messages] == [True, True]
    for turn in (1, 2):
        in_turn = [e["type"] for e in events if e["data"].get("turn") == turn]
        assert in_turn[0] == "turn/start" and in_turn[-1] == "turn/end"
        assert in_turn.count("step/start") == in_turn.count("step/end") == 1


def test_permission_requests_answered_allow_reject_always_and_cancelled(
    workspace: Path, sessions: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path, provider="scripted", sessions=sessions)
    out = workspace / "out.txt"

    async def conversation() -> dict[str, Any]:
        client = RecordingClient(["allow_once", "reject_once", "allow_always", None])
        seen: dict[str, Any] = {}
        async with spawn(client, *child("permissions", config)) as (conn, process):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            sid = new.session_id

            async def prompt() -> Any:
                return await conn.prompt(session_id=sid, prompt=[text_block("write")])

            seen["allowed"] = (await prompt(), client.take(), out.read_text())
            seen["rejected"] = (await prompt(), client.take(), out.read_text())
            seen["always"] = (await prompt(), client.take(), out.read_text())
            asked = client.seen("permission")
            asked.clear()
            pending = asyncio.ensure_future(prompt())
            await asked.wait()
            await conn.cancel(session_id=sid)
            seen["cancelled"] = await pending
            client.release()
            seen["requests"] = client.permission_requests
            seen["status"] = process
        seen["status"] = seen["status"].returncode
        return seen

    seen = run_client(conversation())

    requests = seen["requests"]
    assert len(requests) == 4  # the second write of "allow always" was not asked
    first = requests[0]
    assert [o["optionId"] for o in first["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
    ]
    assert [o["kind"] for o in first["options"]] == ["allow_once", "allow_always", "reject_once"]
    assert first["toolCall"]["toolCallId"] == "w1"
    assert (first["toolCall"]["title"], first["toolCall"]["kind"]) == ("Write out.txt", "edit")
    assert first["toolCall"]["rawInput"] == {"path": "out.txt", "content": "one\n"}
    assert requests[3]["toolCall"]["kind"] == "execute"

    response, updates, content = seen["allowed"]
    assert response.stop_reason == "end_turn" and content == "one\n"
    done = [u for u in updates if u.get("status") in ("completed", "failed")]
    assert [(u["toolCallId"], u["status"]) for u in done] == [("w1", "completed")]
    diff = done[0]["content"][0]
    assert diff == {"type": "diff", "path": str(out), "newText": "one\n"}  # oldText: new file

    response, updates, content = seen["rejected"]
    assert response.stop_reason == "end_turn" and content == "one\n"
    done = [u for u in updates if u.get("status") in ("completed", "failed")]
    assert [(u["toolCallId"], u["status"]) for u in done] == [("w2", "failed")]
    assert "in_progress" not in [u.get("status") for u in updates]
    assert "the user rejected the call" in done[0]["content"][0]["content"]["text"]

    response, updates, content = seen["always"]
    assert response.stop_reason == "end_turn" and content == "four\n"
    done = [u for u in updates if u.get("status") in ("completed", "failed")]
    assert [(u["toolCallId"], u["status"]) for u in done] == [
        ("w3", "completed"),
        ("w4", "completed"),
    ]
    assert done[0]["content"][0]["oldText"] == "one\n"
    assert done[0]["content"][0]["newText"] == "three\n"

    assert seen["cancelled"].stop_reason == "cancelled"
    assert seen["status"] == 0


def test_stop_reasons_follow_the_turn_end(workspace: Path, sessions: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, provider="scripted", sessions=sessions)

    async def conversation() -> tuple[list[Any], list[dict[str, Any]]]:
        client = RecordingClient()
        outcomes: list[Any] = []
        async with spawn(client, *child("stop-reasons", config)) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            for words in ("go", "go", "a forbidden thing", "go"):
                try:
                    response = await conn.prompt(
                        session_id=new.session_id, prompt=[text_block(words)]
                    )
                    outcomes.append(response.stop_reason)
                except RequestError as exc:
                    outcomes.append((exc.code, exc.data))
        return outcomes, client.updates

    outcomes, updates = run_client(conversation())

    assert outcomes == [
        "max_tokens",
        (-32603, {"code": "AUTH", "message": "the key was refused"}),
        "refusal",
        "end_turn",
    ]
    last = updates[-3:]  # the scripted model reports no usage: no usage_update
    assert kinds(last) == ["agent_thought_chunk", "agent_message_chunk"]
    assert joined(last, "agent_thought_chunk") == "let me think"


def test_closing_stdin_mid_turn_disposes_the_turn_and_exits_cleanly(
    workspace: Path, sessions: Path, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path, provider="scripted", sessions=sessions, shell="allow", allow=("shell",)
    )
    marker = f"{600 + random.random():.9f}"

    async def conversation() -> tuple[str, Any, int | None, list[int]]:
        client = RecordingClient()
        async with spawn(client, *child("shell-hang", config), env={"ACP_TEST_MARKER": marker}) as (
            conn,
            process,
        ):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=new.session_id, prompt=[text_block("run it")])
            )
            await client.seen("in_progress").wait()
            while not processes_mentioning(marker):  # the shell command has started
                await asyncio.sleep(0.01)
            assert process.stdin is not None
            process.stdin.close()
            response = await prompt
            # generous next to the 10 s close budget; bench_acp measures the cancel itself
            status = await asyncio.wait_for(process.wait(), 30)
            left = processes_mentioning(marker)
        return new.session_id, response, status, left

    session_id, response, status, left = run_client(conversation())

    assert response.stop_reason == "cancelled"
    assert status == 0
    assert left == []
    events = read_log(sessions, session_id)
    assert [e["reason"] for e in of_type(events, "turn/end")] == ["disposed"]
    results = of_type(events, "tool/result")
    assert [(r["call_id"], r["result"]["code"]) for r in results] == [("s1", "ABORTED")]


def test_a_chatty_turn_does_not_stall_on_an_unread_stderr(
    workspace: Path, sessions: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path, provider="scripted", sessions=sessions)

    async def conversation() -> tuple[Any, list[dict[str, Any]], asyncio.subprocess.Process]:
        client = RecordingClient()
        async with spawn(client, *child("chatty", config)) as (conn, process):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            response = await conn.prompt(session_id=new.session_id, prompt=[text_block("talk")])
        return response, client.updates, process

    response, updates, process = run_client(conversation())

    assert response.stop_reason == "end_turn"
    assert joined(updates, "agent_message_chunk") == "".join(f"w{i} " for i in range(400))
    assert process.returncode == 0
    # ~1.6 MB were logged; what reached the pipe is bounded by the pipe plus the queue
    assert "[stdout] stray write to fd 1" in stderr_text(process)
    assert "stray print to stdout" in stderr_text(process)
    assert len(stderr_text(process)) < 1024 * 1024
