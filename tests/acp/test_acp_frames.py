"""Protocol hardening against a real server process: malformed frames, and a SIGTERM mid-turn.

Each bad frame must get the right JSON-RPC error (or, for a notification, nothing), and the
connection must keep serving: the test ends with a prompt that completes. Every line the server
writes is checked to be a JSON-RPC 2.0 object (``RawClient.next_frame``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from acp_helpers import CHILD, TRIO_AGENT, of_type, read_log, write_config
from acp_rawclient import RawClient

LIMIT = 64 * 1024


def _request(request_id: int, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _line(value: Any) -> bytes:
    import json

    return json.dumps(value).encode() + b"\n"


async def test_malformed_frames_get_the_right_errors_and_the_connection_keeps_serving(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = write_config(tmp_path, provider="offline", sessions=tmp_path / "sessions")
    command = [TRIO_AGENT, "acp", "-c", str(config), "--max-message-bytes", str(LIMIT)]
    with trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert process.stdin is not None and process.stdout is not None
        client = RawClient(process.stdin, process.stdout)

        async def expect(frame: bytes, code: int, answer_id: Any = None) -> None:
            await client.send_bytes(frame)
            answer = await client.response()
            assert answer.get("error", {}).get("code") == code, (frame[:200], answer)
            assert answer["id"] == answer_id, (frame[:200], answer)

        async def expect_silence(frame: bytes) -> None:
            await client.send_bytes(frame)
            answer = await client.call("no/such/method")  # the next answer is for this one
            assert answer["error"]["code"] == -32601

        # framing and JSON
        await expect(b"not json\n", -32700)
        await expect(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{\n', -32700)
        await expect(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"v":NaN}}\n', -32700)
        await expect(b'\xff\xfe{"jsonrpc":"2.0"}\n', -32700)
        await expect(b'"' + b"a" * (LIMIT * 3) + b'"\n', -32700)
        await expect(b"[]\n", -32600)
        await expect(_line([_request(5, "initialize", {"protocolVersion": 1})]), -32600)
        await expect(b"42\n", -32600)
        await expect(b'"text"\n', -32600)
        await expect(b"null\n", -32600)
        # the request object
        await expect(_line({"id": 7, "method": "initialize", "params": {}}), -32600, 7)
        await expect(_line({"jsonrpc": "1.0", "id": 8, "method": "initialize"}), -32600, 8)
        await expect(_line({"jsonrpc": "2.0", "id": 9, "method": 42}), -32600, 9)
        await expect(_line({"jsonrpc": "2.0", "id": {"a": 1}, "method": "initialize"}), -32600)
        await expect(_line({"jsonrpc": "2.0", "id": True, "method": "initialize"}), -32600)
        await expect(_line({"jsonrpc": "2.0", "id": 1.5, "method": "initialize"}), -32600)
        await expect(_line(_request(10, "initialize", "x")), -32600, 10)
        await expect(_line(_request(11, "initialize", [1])), -32602, 11)
        await expect(_line(_request(12, "no/such")), -32601, 12)
        await expect_silence(_line({"jsonrpc": "2.0", "method": "no/such"}))
        await expect_silence(_line({"jsonrpc": "2.0", "id": 99, "result": {}}))
        await expect_silence(b"   \n\r\n")
        # state and parameters
        await expect(_line(_request(13, "session/new", {"cwd": str(work)})), -32600, 13)
        await expect(_line(_request(14, "initialize", {"protocolVersion": {}})), -32602, 14)
        assert (await client.result("initialize", {"protocolVersion": 1}))["protocolVersion"] == 1
        await expect(_line(_request(15, "session/new", {"cwd": 5})), -32602, 15)
        await expect(_line(_request(16, "session/new", {"cwd": "work"})), -32602, 16)
        await expect(_line(_request(17, "session/new", {"cwd": str(work / "no")})), -32602, 17)
        bad_servers = {"cwd": str(work), "mcpServers": "nope"}
        await expect(_line(_request(18, "session/new", bad_servers)), -32602, 18)
        bad_server = {"cwd": str(work), "mcpServers": [{"name": "x", "args": []}]}
        await expect(_line(_request(19, "session/new", bad_server)), -32602, 19)
        unknown = {"sessionId": "acp-nope", "prompt": [{"type": "text", "text": "hi"}]}
        await expect(_line(_request(20, "session/prompt", unknown)), -32002, 20)
        await expect(_line(_request(21, "session/prompt", {"prompt": []})), -32602, 21)
        load = {"sessionId": "acp-never-stored", "cwd": str(work), "mcpServers": []}
        await expect(_line(_request(22, "session/load", load)), -32002, 22)
        evil = {"sessionId": "../../etc/passwd", "cwd": str(work), "mcpServers": []}
        await expect(_line(_request(23, "session/load", evil)), -32602, 23)
        await expect(_line(_request(24, "session/close", {"sessionId": "acp-nope"})), -32002, 24)

        session_id = (await client.result("session/new", {"cwd": str(work), "mcpServers": []}))[
            "sessionId"
        ]

        def prompt(request_id: int, *blocks: Any) -> bytes:
            return _line(
                _request(
                    request_id, "session/prompt", {"sessionId": session_id, "prompt": list(blocks)}
                )
            )

        await expect(prompt(30), -32602, 30)
        await expect(prompt(31, {"type": "audio", "data": "", "mimeType": "audio/wav"}), -32602, 31)
        image = {"type": "image", "data": "!!!", "mimeType": "image/png"}
        await expect(prompt(32, image), -32602, 32)
        await expect(prompt(33, {"type": "video"}), -32602, 33)
        await expect(prompt(34, {"type": "text", "text": 5}), -32602, 34)

        # A prompt while a prompt runs; then the cancel. All three frames arrive together, so
        # the second prompt and the cancel are read before the first one's turn can start.
        hello = {"type": "text", "text": "hello"}
        cancel = _line(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        )
        await client.send_bytes(prompt(40, hello) + prompt(41, hello) + cancel)
        busy = await client.response()
        assert (busy["id"], busy["error"]["code"]) == (41, -32600)
        cancelled = await client.response()
        assert (cancelled["id"], cancelled["result"]["stopReason"]) == (40, "cancelled")

        # still serving
        done = await client.result("session/prompt", {"sessionId": session_id, "prompt": [hello]})
        assert done["stopReason"] == "end_turn"
        assert [u["sessionUpdate"] for u in client.updates(session_id)][-1] == "usage_update"

        await process.stdin.aclose()
        assert await client.next_frame() is None
        assert await process.wait() == 0


async def test_sigterm_mid_turn_ends_it_disposed_and_exits_cleanly(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    sessions = tmp_path / "sessions"
    config = write_config(tmp_path, provider="scripted", sessions=sessions)
    command = [sys.executable, CHILD, "hanging", "-c", str(config)]
    with trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert process.stdin is not None and process.stdout is not None
        client = RawClient(process.stdin, process.stdout)
        await client.result("initialize", {"protocolVersion": 1})
        new = await client.result("session/new", {"cwd": str(work), "mcpServers": []})
        prompt = {"sessionId": new["sessionId"], "prompt": [{"type": "text", "text": "go"}]}
        await client.send(_request(7, "session/prompt", prompt))
        frame = await client.next_frame()
        assert frame is not None and frame["method"] == "session/update"
        process.send_signal(signal.SIGTERM)
        answer = await client.response()
        assert answer == {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "cancelled"}}
        assert await client.next_frame() is None  # stdout closed after the last message
        assert await process.wait() == 0
        await process.stdin.aclose()
    events = read_log(sessions, new["sessionId"])
    assert [e["reason"] for e in of_type(events, "turn/end")] == ["disposed"]
