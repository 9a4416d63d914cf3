"""The ACP server's parts on their own: stop reasons, framing, content, tool views,
permissions, the bounded stderr, the exports and the command line."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from acp_helpers import TRIO_AGENT

from trio_agent.acp import (
    AcpApprovalService,
    PermissionBridge,
    PermissionQuestion,
    RpcError,
)
from trio_agent.acp._content import prompt_blocks
from trio_agent.acp._jsonrpc import FrameReader, Oversized
from trio_agent.acp._session import stop_reason
from trio_agent.acp._stderr import SinkWriter, StderrSink
from trio_agent.acp._toolview import ToolView
from trio_agent.ids import CallId
from trio_agent.llm import ImageBlock, TextBlock
from trio_agent.tools import ApprovalRequest, Approved, Denied
from trio_agent.tools.builtin import BUILTIN_TOOL_NAMES, Workspace

# --- stop reasons -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        ("completed", "end_turn"),
        ("max-tokens", "max_tokens"),
        ("max-steps", "max_turn_requests"),
        ("rejected", "refusal"),
        ("aborted", "cancelled"),
        ("disposed", "cancelled"),
        ("interrupted", "cancelled"),
    ],
)
def test_turn_end_reasons_map_to_stop_reasons(reason: str, stop: str) -> None:
    assert stop_reason(reason) == stop


@pytest.mark.parametrize("reason", ["error", "exploded"])
def test_error_and_unknown_reasons_have_no_stop_reason(reason: str) -> None:
    with pytest.raises(ValueError, match="no ACP stopReason"):
        stop_reason(reason)


# --- framing ----------------------------------------------------------------------------------


async def frames_of(chunks: list[bytes], limit: int) -> list[bytes | Oversized]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    reader = FrameReader(receive, limit)
    out: list[bytes | Oversized] = []
    async with trio.open_nursery() as nursery:

        async def feed() -> None:
            for chunk in chunks:
                await send.send_all(chunk)
                await trio.testing.wait_all_tasks_blocked()
            await send.aclose()

        nursery.start_soon(feed)
        while (frame := await reader.next()) is not None:
            out.append(frame)
    return out


async def test_frames_split_on_newlines_strip_cr_and_keep_a_last_unterminated_line() -> None:
    assert await frames_of([b"a\r\nb", b"c\n\nd"], 100) == [b"a", b"bc", b"", b"d"]


async def test_an_oversized_frame_is_skipped_and_reading_goes_on() -> None:
    chunks = [b"x" * 50, b"x" * 80 + b"\nok\n", b"y" * 300]
    assert await frames_of(chunks, 100) == [Oversized(130), b"ok", Oversized(300)]


async def test_a_frame_exactly_at_the_limit_is_kept() -> None:
    assert await frames_of([b"z" * 100 + b"\n"], 100) == [b"z" * 100]


# --- prompt content ---------------------------------------------------------------------------


def test_prompt_blocks_convert_every_supported_kind() -> None:
    blocks = prompt_blocks(
        [
            {"type": "text", "text": "hi"},
            {"type": "image", "mimeType": "image/png", "data": "aGk="},
            {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"},
            {"type": "resource", "resource": {"uri": "file:///b.py", "text": "print(1)"}},
            {
                "type": "resource",
                "resource": {"uri": "file:///c.png", "blob": "aGk=", "mimeType": "image/png"},
            },
            {"type": "resource", "resource": {"uri": "file:///d.bin", "blob": "aGk="}},
        ]
    )
    assert blocks == (
        TextBlock("hi"),
        ImageBlock("image/png", "aGk="),
        TextBlock("[resource: a.py](file:///a.py)"),
        TextBlock('<resource uri="file:///b.py">\nprint(1)\n</resource>'),
        ImageBlock("image/png", "aGk="),
        TextBlock("[binary resource file:///d.bin (unknown type, 4 base64 characters) not shown]"),
    )


@pytest.mark.parametrize(
    ("prompt", "path"),
    [
        ("hi", "prompt"),
        ([], "prompt"),
        ([5], "prompt[0]"),
        ([{"type": "text"}], "prompt[0].text"),
        ([{"type": "image", "mimeType": "text/plain", "data": "aGk="}], "prompt[0].mimeType"),
        ([{"type": "image", "mimeType": "image/png", "data": "@@"}], "prompt[0].data"),
        ([{"type": "audio", "mimeType": "audio/wav", "data": ""}], "prompt[0].type"),
        ([{"type": "text", "text": "ok"}, {"type": "nope"}], "prompt[1].type"),
        ([{"type": "resource", "resource": "x"}], "prompt[0].resource"),
    ],
)
def test_bad_prompts_name_the_offending_path(prompt: Any, path: str) -> None:
    with pytest.raises(RpcError) as caught:
        prompt_blocks(prompt)
    assert caught.value.code == -32602
    assert caught.value.data["path"] == path


# --- tool views -------------------------------------------------------------------------------


def test_tool_views_sanitise_titles_and_confine_locations(tmp_path: Path) -> None:
    view = ToolView(Workspace(tmp_path), frozenset(BUILTIN_TOOL_NAMES))
    evil = view.start("c1", "read_file", '{"path": "../../etc/passwd\\u001b[31m\\n"}')
    assert "locations" not in evil
    assert "\x1b" not in evil["title"] and "\n" not in evil["title"]
    inside = view.start("c2", "read_file", '{"path": "src/a.py", "start_line": 3}')
    assert inside["locations"] == [{"path": str(tmp_path.resolve() / "src/a.py"), "line": 3}]
    long = view.start("c3", "shell", '{"command": "' + "x" * 500 + '"}')
    assert len(long["title"]) == 160 and long["kind"] == "execute"
    other = view.start("c4", "mcp__thing", "[1, 2]")
    assert (other["kind"], other["rawInput"]) == ("other", {"arguments": "[1, 2]"})


# --- permissions ------------------------------------------------------------------------------


class FakePeer:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.sent.append(params)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class FakeSession:
    session_id = "s1"

    def describe_call(self, call_id: str, tool: str, arguments: str) -> dict[str, Any]:
        return {"toolCallId": call_id, "title": tool}


def bridge(*answers: Any) -> tuple[PermissionBridge, FakePeer]:
    peer = FakePeer(*answers)
    sessions = {"s1": FakeSession()}
    return PermissionBridge(peer, sessions.get), peer  # type: ignore[arg-type]


def selected(option: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option}}


def question(tool: str = "write_file", agent: str = "s1") -> PermissionQuestion:
    return PermissionQuestion(agent, "c1", tool, "{}", "because")


async def test_the_bridge_maps_every_answer() -> None:
    permissions, peer = bridge(
        selected("allow_once"),
        selected("reject_once"),
        {"outcome": {"outcome": "cancelled"}},
        selected("something-else"),
        {"unexpected": True},
        RpcError(-32603, "client broke"),
        selected("allow_always"),
    )
    answers = [await permissions.ask(question()) for _ in range(7)]
    assert [a.allowed for a in answers] == [True, False, False, False, False, False, True]
    assert answers[6].remember
    assert "client broke" in (answers[5].reason or "")
    # remembered: the next call of that tool in that session is not asked
    assert (await permissions.ask(question())).allowed
    assert len(peer.sent) == 7
    assert peer.sent[0]["sessionId"] == "s1"
    assert peer.sent[0]["toolCall"] == {"toolCallId": "c1", "title": "write_file"}
    permissions.forget("s1")
    with pytest.raises(IndexError):  # asked again, and the fake has no answer left
        await permissions.ask(question())


async def test_an_agent_without_an_acp_session_is_refused_without_asking() -> None:
    permissions, peer = bridge()
    answer = await permissions.ask(question(agent="stranger"))
    assert not answer.allowed and peer.sent == []


async def test_the_approval_service_answers_approved_or_denied() -> None:
    permissions, _ = bridge(
        selected("allow_once"), selected("reject_once"), selected("allow_always")
    )
    service = AcpApprovalService(permissions)

    def request(agent: str | None, call: str) -> ApprovalRequest:
        return ApprovalRequest(agent, CallId(call), "write_file", "{}", "needs a yes")

    assert await service.request(request("s1", "c1")) == Approved()
    assert await service.request(request("s1", "c2")) == Denied("the user rejected the call")
    assert await service.request(request("s1", "c3")) == Approved(remember="session")
    orphan = await service.request(request(None, "c4"))
    assert isinstance(orphan, Denied)


# --- bounded stderr ---------------------------------------------------------------------------


async def test_the_stderr_sink_never_blocks_on_a_pipe_nobody_reads() -> None:
    read_end, write_end = os.pipe()
    sink = StderrSink(write_end, max_pending=8192, max_line=1024)

    def flood() -> None:
        for i in range(5000):
            sink.write_line(f"line {i} " + "x" * 900)

    try:
        with trio.fail_after(30):  # a blocking sink would hang here
            await trio.to_thread.run_sync(flood, abandon_on_cancel=True)
        assert sink.dropped > 4000
    finally:
        sink.close(timeout=0)
        os.close(read_end)  # the blocked writer thread gets EPIPE and ends
        os.close(write_end)


async def test_the_sink_writes_whole_lines_and_reports_drops(tmp_path: Path) -> None:
    path = tmp_path / "err.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    sink = StderrSink(fd, max_pending=50, max_line=30)
    gate = threading.Event()
    writer = SinkWriter(sink)
    try:
        writer.write("first line\nsecond ")
        writer.write("part\n" + "y" * 100 + "\n")
        writer.flush()
        gate.set()
    finally:
        sink.close(timeout=5)
        os.close(fd)
    lines = path.read_text().splitlines()
    assert lines[:2] == ["first line", "second part"]
    assert all(len(line) <= 29 for line in lines)


# --- the command line -------------------------------------------------------------------------


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRIO_AGENT, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def test_the_command_line(tmp_path: Path) -> None:
    assert "acp" in run("--help", cwd=tmp_path).stdout
    helped = run("acp", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "trio-agent acp" in helped.stdout
    missing = run("acp", "-c", str(tmp_path / "none.yml"), cwd=tmp_path)
    assert missing.returncode == 2 and "trio-agent: CONFIG:" in missing.stderr
    assert missing.stdout == ""
    (tmp_path / "c.yml").write_text("agents: [{id: coder}]\n")
    wrong = run("acp", "-c", str(tmp_path / "c.yml"), "--agent", "nobody", cwd=tmp_path)
    assert wrong.returncode == 2 and "no such agent" in wrong.stderr and "coder" in wrong.stderr
    empty = run("acp", "-c", str(tmp_path / "c.yml"), "--agent", "coder", cwd=tmp_path)
    assert empty.returncode == 0 and empty.stdout == ""  # stdin at EOF: a clean exit
    usage = run("acp", "--context-window", "0", cwd=tmp_path)
    assert usage.returncode == 2
