"""#19 in the CLI's sessions and approvals: a parent's transcript links to its children's
sessions, a resumed parent resumes none of them, a stored session's text cannot drive the
terminal, and the approval question names the child that asks (the real ``trio-agent``
command, on a fake OpenAI server on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import is_child_request, last_user_text, request_messages, run_cli

from trio_agent.cli._approval import asker
from trio_agent.cli._output import escape_controls
from trio_agent.ids import CallId
from trio_agent.persistence import JsonlPersistence
from trio_agent.runtime import open_runtime
from trio_agent.session import SessionStore, TurnEnd, TurnStart
from trio_agent.testing import (
    FakeResponse,
    RecordedRequest,
    completion_chunk,
    open_fake_openai_server,
    sse_done,
    sse_event,
    sse_finish,
    sse_reply,
    sse_response,
    sse_tool_call,
    sse_usage,
)
from trio_agent.tools import ApprovalRequest

#: What a terminal would obey: ESC, BEL, a C1 CSI, a bidi override, a carriage return.
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


async def _ok(cwd: Path, *args: str) -> str:
    done = await run_cli(cwd, *args)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _config(workspace: Path, base_url: str, builtin: str = "[]") -> None:
    (workspace / "trio-agent.yml").write_text(
        "llm:\n"
        f"  providers: [{{name: local, type: openai, base_url: '{base_url}', models: [m]}}]\n"
        "  retry: {max_attempts: 1}\n"
        f"tools: {{builtin: {builtin}}}\n"
        "subagents:\n"
        "  - {name: worker, description: Does a piece of work., instructions: Answer briefly.}\n"
    )


def _tool_calls(*calls: tuple[str, str]) -> FakeResponse:
    """One answer making ``calls`` (name, raw arguments text), with ids ``call_0`` on."""
    pieces = [sse_event(completion_chunk({"role": "assistant", "content": ""}))]
    for index, (name, arguments) in enumerate(calls):
        pieces.append(sse_tool_call(index, id=f"call_{index}", name=name, arguments=arguments))
    return sse_response(*pieces, sse_finish("tool_calls"), sse_usage(10, 5), sse_done())


def _delegating(*tasks: str) -> Any:
    """The parent delegates ``tasks`` in parallel (first turn only) and then answers; each
    child answers ``done: TASK``."""

    def answer(request: RecordedRequest) -> FakeResponse:
        if is_child_request(request):
            return sse_reply(f"done: {last_user_text(request)}")
        last = request_messages(request)[-1]
        if last["role"] == "tool":
            return sse_reply("All done.")
        if last["content"] == "again":
            return sse_reply("Nothing to delegate this time.")
        return _tool_calls(*[("subagent", json.dumps({"task": task})) for task in tasks])

    return answer


def _session_of(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.startswith("session: "):
            return line.split()[1]
    raise AssertionError(f"no session id in: {stderr}")


def _stored(workspace: Path, session: str) -> Path:
    return workspace / ".trio-agent" / "sessions" / f"{session}.jsonl"


async def _delegate(workspace: Path, *tasks: str) -> tuple[str, dict[str, str]]:
    """Run a parent that starts one child per task; its session and ``{child session: task}``
    (the parallel calls may take the numbers in either order)."""
    async with open_fake_openai_server([_delegating(*tasks)] * (2 + 2 * len(tasks))) as server:
        _config(workspace, server.base_url)
        run = await run_cli(workspace, "run", "look around")
    err = run.stderr.decode()
    assert run.returncode == 0, err
    parent = _session_of(err)
    children = {}
    for line in err.splitlines():
        child, sep, task = line.removeprefix("  ↳ ").partition(" started: ")
        if sep:
            children[child] = task
    assert len(children) == len(tasks), err
    return parent, children


def _link(child: str) -> str:
    return f"  - ↳ child session {child} (trio-agent sessions show {child})"


async def test_show_links_each_child_under_the_result_of_its_call(tmp_path: Path) -> None:
    tasks = ("count the files", "name the biggest file")
    parent, children = await _delegate(tmp_path, *tasks)
    assert set(children) == {f"{parent}.worker-1", f"{parent}.worker-2"}

    show = await _ok(tmp_path, "sessions", "show", parent)
    lines = show.splitlines()
    for child, task in children.items():
        # The child's line comes right under the result of the call that started it.
        [result] = [i for i, line in enumerate(lines) if line.startswith(f"  - ok: done: {task}")]
        assert lines[result + 1] == _link(child)
    assert sum(1 for line in lines if "↳" in line) == 2

    # The command the link names opens the child's own transcript.
    for child, task in children.items():
        shown = await _ok(tmp_path, "sessions", "show", child)
        assert shown.startswith(f"# Session {child}\n")
        assert f"**User:** {task}" in shown
        assert f"**Assistant:** done: {task}" in shown

    markdown = await _ok(tmp_path, "sessions", "export", parent, "--format", "md")
    assert show.startswith(markdown)
    # json carries the links next to the exact events; jsonl stays the stored bytes.
    document = json.loads(await _ok(tmp_path, "sessions", "export", parent, "--format", "json"))
    stored = _stored(tmp_path, parent).read_bytes()
    assert [json.loads(line) for line in stored.splitlines()] == [
        document["header"],
        *document["events"],
    ]
    links = {link["session_id"]: link for link in document["subagents"]}
    assert set(links) == set(children)
    for child, link in links.items():
        assert link["agent_id"] == "trio-agent." + child.rsplit(".", 1)[1]
        assert (link["definition"], link["mode"], link["background"]) == ("worker", "spawn", False)
        assert link["call_id"] in ("call_0", "call_1")
    exported = await run_cli(tmp_path, "sessions", "export", parent)
    assert exported.stdout == stored
    # A session that started no child has no links and no "subagents" key.
    [child] = [c for c, task in children.items() if task == tasks[0]]
    child_document = json.loads(
        await _ok(tmp_path, "sessions", "export", child, "--format", "json")
    )
    assert "subagents" not in child_document


async def test_a_link_to_a_child_session_that_was_not_stored_says_so(tmp_path: Path) -> None:
    parent, children = await _delegate(tmp_path, "summarise")
    [child] = children
    _stored(tmp_path, child).unlink()
    show = await _ok(tmp_path, "sessions", "show", parent)
    assert f"  - ↳ child session {child} (not stored)" in show.splitlines()
    assert "sessions show" not in show


async def test_resuming_a_parent_resumes_none_of_its_children(tmp_path: Path) -> None:
    parent, children = await _delegate(tmp_path, "summarise")
    [child] = children
    child_log = _stored(tmp_path, child).read_bytes()
    listed = await _ok(tmp_path, "sessions", "list", "--json")
    async with open_fake_openai_server([_delegating("unused")] * 2) as server:
        _config(tmp_path, server.base_url)
        resumed = await run_cli(tmp_path, "run", "--resume", parent, "again")
        requests = list(server.requests)
    err = resumed.stderr.decode()
    assert resumed.returncode == 0, err
    assert resumed.stdout.decode() == "Nothing to delegate this time.\n"
    # One model call, the parent's: the child was not resumed, started or asked anything.
    assert len(requests) == 1
    assert not is_child_request(requests[0])
    assert "↳" not in err
    assert _stored(tmp_path, child).read_bytes() == child_log
    again = json.loads(await _ok(tmp_path, "sessions", "list", "--json"))
    assert sorted(i["session_id"] for i in again) == sorted(
        i["session_id"] for i in json.loads(listed)
    )
    # The parent's transcript still links the child from its first turn.
    show = await _ok(tmp_path, "sessions", "show", parent)
    assert _link(child) in show.splitlines()
    assert "## Turn 2" in show


async def test_a_hostile_stored_session_is_shown_escaped(tmp_path: Path) -> None:
    prompt = "hi\x1b]0;pwned\x07 there\u202e"
    answer_text = "line one\x1b[2J\n\tline two\x9b31m\r\nend\u202e"
    arguments = '{"path": "a\x1b[31m\x07\nb"}'

    def answer(request: RecordedRequest) -> FakeResponse:
        if request_messages(request)[-1]["role"] == "tool":
            return sse_reply(answer_text)
        return _tool_calls(("no_such\x1b[2Jtool", arguments))

    async with open_fake_openai_server([answer] * 2) as server:
        _config(tmp_path, server.base_url)
        run = await run_cli(tmp_path, "run", prompt)
    assert run.returncode == 0, run.stderr.decode()
    session = _session_of(run.stderr.decode())

    for args in (("show",), ("export", "--format", "markdown")):
        shown = await _ok(tmp_path, "sessions", args[0], session, *args[1:])
        for raw in RAW:
            assert raw not in shown, (args, raw)
        # Line breaks and tabs of the stored text stay; everything else is shown escaped.
        assert "**User:** hi\\x1b]0;pwned\\x07 there\\u202e" in shown
        assert "**Assistant:** line one\\x1b[2J\n\tline two\\x9b31m\\r\nend\\u202e" in shown
        assert "- tool `no_such\\x1b[2Jtool` `" + '{"path": "a\\x1b[31m\\x07\\nb"}`' in shown

    # json and jsonl are data: exact.
    document = json.loads(await _ok(tmp_path, "sessions", "export", session, "--format", "json"))
    by_type = {event["type"]: event for event in document["events"]}
    assert by_type["tool/call"]["data"]["arguments"] == arguments
    assert by_type["assistant/message"]["data"]["message"]["content"][0]["text"] == answer_text
    exported = await run_cli(tmp_path, "sessions", "export", session)
    assert exported.stdout == _stored(tmp_path, session).read_bytes()


@pytest.mark.parametrize(
    ("text", "multiline", "expected"),
    [
        ("plain ü text", False, "plain ü text"),
        ("a\nb\tc", False, "a\\nb\\tc"),
        ("a\nb\tc", True, "a\nb\tc"),
        ("a\r\nb", True, "a\\r\nb"),
        ("\x1b[2J\x07\x9b\x7f\u202e\u2066", True, "\\x1b[2J\\x07\\x9b\\x7f\\u202e\\u2066"),
        ("no\xa0break\u202fnarrow", True, "no\xa0break\u202fnarrow"),
        ("no\xa0break", False, "no\\xa0break"),
        ("line\u2028sep", True, "line\\u2028sep"),
    ],
)
def test_escape_controls(text: str, multiline: bool, expected: str) -> None:
    assert escape_controls(text, multiline=multiline) == expected


# --- a child's approval question ---------------------------------------------------------

#: The chat approval question.
QUESTION = "allow? [y]es once / [n]o / [a]lways for this tool in this session: "


def _answer(request: RecordedRequest) -> FakeResponse:
    """The parent delegates once; the child writes a file, then reports."""
    last = request_messages(request)[-1]
    if is_child_request(request):
        if last["role"] == "tool":
            return sse_reply(f"child saw: {last['content']}")
        return _tool_calls(("write_file", json.dumps({"path": "out.txt", "content": "hi"})))
    if last["role"] == "tool":
        return sse_reply("All done.")
    return _tool_calls(("subagent", json.dumps({"task": "write out.txt"})))


async def test_run_names_the_child_whose_call_it_denies(tmp_path: Path) -> None:
    async with open_fake_openai_server([_answer] * 4) as server:
        _config(tmp_path, server.base_url, builtin="[write_file]")
        done = await run_cli(tmp_path, "run", "delegate")
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert not (tmp_path / "out.txt").exists()
    [denied] = [line for line in err.splitlines() if "denied" in line and "trio-agent:" in line]
    assert denied.startswith("trio-agent: [child trio-agent.worker-1] denied write_file (call_0): ")
    assert "--yes or --allow write_file" in denied


async def test_run_allow_covers_the_childs_call(tmp_path: Path) -> None:
    async with open_fake_openai_server([_answer] * 4) as server:
        _config(tmp_path, server.base_url, builtin="[write_file]")
        done = await run_cli(tmp_path, "run", "--allow", "write_file", "delegate")
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "out.txt").read_text() == "hi"
    assert "denied" not in done.stderr.decode()


async def test_chat_asks_the_person_once_naming_the_child(tmp_path: Path) -> None:
    async with open_fake_openai_server([_answer] * 4) as server:
        _config(tmp_path, server.base_url, builtin="[write_file]")
        done = await run_cli(tmp_path, "chat", stdin=b"delegate\ny\n")
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "out.txt").read_text() == "hi"
    lines = out.splitlines()
    [asked] = [i for i, line in enumerate(lines) if line.startswith("approval: ")]
    assert lines[asked] == "approval: [child trio-agent.worker-1] write_file (call_0)"
    assert lines[asked + 1 : asked + 3] == ["  path: out.txt", "  content: hi"]
    assert out.count(QUESTION) == 1
    assert "All done." in out


@pytest.mark.parametrize(
    ("agent", "shown"),
    [
        (None, ""),
        ("trio-agent", ""),
        ("trio-agent.worker-1", "[child trio-agent.worker-1] "),
        ("p.reviewer-2.worker-10", "[child p.reviewer-2.worker-10] "),
        ("a-1", ""),
        ("p.worker", ""),
    ],
)
def test_asker_names_a_child_only(agent: str | None, shown: str) -> None:
    request = ApprovalRequest(agent=agent, call_id=CallId("c"), tool="shell", arguments="{}")
    assert asker(request) == shown


async def test_hand_made_links_are_checked_before_they_are_shown(tmp_path: Path) -> None:
    """A parent log written by a program (not by a real child): a link to a session that is
    not stored, one without a call, and records that name no possible session."""
    (tmp_path / "trio-agent.yml").write_text("tools: {builtin: []}\n")
    path = str(tmp_path / ".trio-agent" / "sessions")
    record = {"agent_id": "p.w-1", "definition": "w", "mode": "spawn", "depth": 1}
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        store = ctx.require(SessionStore)
        await ctx.plugin(JsonlPersistence, JsonlPersistence.Config(path=path))
        for name in ("parent", "parent.w-1"):
            session = store.create(name)
            session.append(TurnStart(turn=1))
            if name == "parent":
                for data in (
                    {"call_id": None, "session_id": "parent.w-1"},
                    {"call_id": ["x"], "session_id": "parent.w-2"},
                    {"call_id": "c1", "session_id": "../../etc/passwd\x1b[2J"},
                    {"call_id": "c2", "session_id": 7},
                    {"call_id": "c3"},
                ):
                    session.append("subagent/start", {"turn": 1, **record, **data})
            session.append(TurnEnd(turn=1, reason="completed"))
            await store.flush(session)
    show = await _ok(tmp_path, "sessions", "show", "parent")
    links = [line for line in show.splitlines() if "↳" in line]
    assert links == [_link("parent.w-1"), "  - ↳ child session parent.w-2 (not stored)"]
    assert "\x1b" not in show
    assert "passwd" not in show
    # json is data: every well-formed record, as stored.
    document = json.loads(await _ok(tmp_path, "sessions", "export", "parent", "--format", "json"))
    assert [link["session_id"] for link in document["subagents"]] == [
        "parent.w-1",
        "parent.w-2",
        "../../etc/passwd\x1b[2J",
        7,
    ]
