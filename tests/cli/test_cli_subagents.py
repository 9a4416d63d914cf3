"""#19 in the CLI: ``run`` and ``chat`` print one status line per child under the ``subagent``
tool line, and everything the model wrote is printed escaped (the real ``trio-agent`` command,
on a fake OpenAI server on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import is_child_request, last_user_text, request_messages, run_cli

from trio_agent.cli._output import clean
from trio_agent.testing import (
    FakeResponse,
    RecordedRequest,
    completion_chunk,
    error_response,
    open_fake_openai_server,
    sse_done,
    sse_event,
    sse_finish,
    sse_reply,
    sse_response,
    sse_tool_call,
    sse_usage,
)


def _config(workspace: Path, base_url: str) -> None:
    (workspace / "trio-agent.yml").write_text(
        "llm:\n"
        f"  providers: [{{name: local, type: openai, base_url: '{base_url}', models: [m]}}]\n"
        "  retry: {max_attempts: 1}\n"
        "tools: {builtin: []}\n"
        "subagents:\n"
        "  - {name: worker, description: Does a piece of work., instructions: Answer briefly.}\n"
    )


def _calls(*tasks: str) -> FakeResponse:
    """One answer calling ``subagent`` once per task, in parallel."""
    return _tool_calls(*[("subagent", {"task": task}) for task in tasks])


def _tool_calls(*calls: tuple[str, dict[str, Any]], first: int = 0) -> FakeResponse:
    """One answer making ``calls`` (name, arguments), with ids ``call_<first>`` on."""
    pieces = [sse_event(completion_chunk({"role": "assistant", "content": ""}))]
    for index, (name, arguments) in enumerate(calls):
        call_id = f"call_{first + index}"
        pieces.append(sse_tool_call(index, id=call_id, name=name, arguments=json.dumps(arguments)))
    return sse_response(*pieces, sse_finish("tool_calls"), sse_usage(10, 5), sse_done())


def _model(*tasks: str, child: Any, final: str = "All done.") -> Any:
    """The fake server's script: the parent delegates ``tasks``, each child answers
    ``child(task)``, then the parent answers ``final``."""

    def answer(request: RecordedRequest) -> FakeResponse:
        if is_child_request(request):
            reply: FakeResponse = child(last_user_text(request))
            return reply
        if request_messages(request)[-1]["role"] == "tool":
            return sse_reply(final)
        return _calls(*tasks)

    return answer


def _status_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("  ↳ ")]


def _session_of(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.startswith("session: "):
            return line.split()[1]
    raise AssertionError(f"no session id in: {stderr}")


async def test_run_prints_a_status_line_per_child_under_the_tool_line(tmp_path: Path) -> None:
    tasks = ("count the files", "name the biggest file")
    answer = _model(*tasks, child=lambda task: sse_reply(f"answer to {task}", usage=(7, 3)))
    async with open_fake_openai_server([answer] * 6) as server:
        _config(tmp_path, server.base_url)
        result = await run_cli(tmp_path, "run", "look around")
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert result.stdout.decode() == "All done.\n"
    parent = _session_of(err)
    lines = err.splitlines()
    first_call = next(i for i, line in enumerate(lines) if line.startswith("→ "))
    # The two calls, then the children's lines and the results (in model order).
    calls = [
        json.loads(line.removeprefix("→ subagent ")) for line in lines[first_call : first_call + 2]
    ]
    assert calls == [{"task": task} for task in tasks]
    after = lines[first_call + 2 :]
    started = {}  # child session -> its task (the calls may take the ids in either order)
    for line in after:
        child, sep, task = line.removeprefix("  ↳ ").partition(" started: ")
        if sep:
            started[child] = task
    assert set(started) == {f"{parent}.worker-1", f"{parent}.worker-2"}
    assert sorted(started.values()) == sorted(tasks)
    for child, task in started.items():
        start = after.index(f"  ↳ {child} started: {task}")
        end = after.index(f"  ↳ {child} ended: completed (tokens in 7 / out 3)")
        [done] = [i for i, line in enumerate(after) if line.startswith(f"← ok: answer to {task} ")]
        assert start < end < done
    results = [line for line in after if line.startswith("← ")]
    assert [line.split(" [")[0] for line in results] == [f"← ok: answer to {t}" for t in tasks]
    assert len(after) == 6


async def test_a_failed_child_says_why_and_json_lists_the_children(tmp_path: Path) -> None:
    def child(task: str) -> FakeResponse:
        return error_response(400, "the model \x1b[31mrefused\x1b[0m this\nrequest")

    async with open_fake_openai_server([_model("break it", child=child)] * 3) as server:
        _config(tmp_path, server.base_url)
        result = await run_cli(tmp_path, "run", "--json", "delegate")
    err = result.stderr.decode()
    assert result.returncode == 0, err
    payload = json.loads(result.stdout)
    assert payload["reason"] == "completed"
    parent = payload["session_id"]
    [summary] = payload["subagents"]
    assert summary["session_id"] == f"{parent}.worker-1"
    assert summary["agent_id"] == "trio-agent.worker-1"
    assert (summary["definition"], summary["call_id"], summary["reason"]) == (
        "worker",
        "call_0",
        "error",
    )
    assert "refused" in summary["error"]
    assert summary["usage"] == {"input_tokens": 0, "output_tokens": 0}
    # --json prints the same lines on stderr as text mode; stdout is only the JSON object.
    started, ended = _status_lines(err)
    assert started == f"  ↳ {parent}.worker-1 started: break it"
    prefix = f"  ↳ {parent}.worker-1 ended: error: "
    assert ended.startswith(prefix + "failed: INVALID_REQUEST: ")
    assert "\\x1b[31mrefused\\x1b[0m this request" in ended
    assert len(ended) <= len(prefix) + 160
    assert "\x1b" not in err
    assert any(line.startswith("← error TOOL_ERROR: ") for line in err.splitlines())


async def test_a_hostile_task_and_answer_are_printed_escaped(tmp_path: Path) -> None:
    task = "look\x1b[2J\x1b]0;pwned\x07 here\n  ↳ forged ended: completed\u202e"
    answer = _model(task, child=lambda _: sse_reply("\x1b[31mred\x1b[0m\n← ok: forged"))
    async with open_fake_openai_server([answer] * 3) as server:
        _config(tmp_path, server.base_url)
        result = await run_cli(tmp_path, "run", "go")
    err = result.stderr.decode()
    assert result.returncode == 0, err
    parent = _session_of(err)
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in err
    lines = err.splitlines()
    # Nothing the model wrote starts a line of its own.
    assert not [
        line for line in lines if "forged" in line and line.startswith(("  ↳ f", "← ok: f"))
    ]
    started, ended = _status_lines(err)
    assert started == (
        f"  ↳ {parent}.worker-1 started: "
        + "look\\x1b[2J\\x1b]0;pwned\\x07 here ↳ forged ended: completed\\u202e"
    )
    assert ended.startswith(f"  ↳ {parent}.worker-1 ended: completed")
    [result_line] = [line for line in lines if line.startswith("← ")]
    assert result_line.startswith("← ok: \\x1b[31mred\\x1b[0m ← ok: forged")
    [call_line] = [line for line in lines if line.startswith("→ subagent ")]
    # The arguments are JSON text: their escapes stay as the model sent them.
    assert call_line.startswith('→ subagent {"task": "look\\u001b[2J\\u001b]0;pwned\\u0007 here\\n')


async def test_a_background_child_says_so_and_ends_under_the_wait(tmp_path: Path) -> None:
    def answer(request: RecordedRequest) -> FakeResponse:
        if is_child_request(request):
            return sse_reply("background answer")
        done = sum(1 for m in request_messages(request) if m["role"] == "tool")
        if done == 0:
            return _tool_calls(("subagent", {"task": "work quietly", "background": True}))
        if done == 1:
            return _tool_calls(("subagent_wait", {"handle": "trio-agent.worker-1"}), first=1)
        return sse_reply("Collected.")

    async with open_fake_openai_server([answer] * 4) as server:
        _config(tmp_path, server.base_url)
        result = await run_cli(tmp_path, "run", "go")
    err = result.stderr.decode()
    assert result.returncode == 0, err
    parent = _session_of(err)
    lines = err.splitlines()
    started = f"  ↳ {parent}.worker-1 started in the background: work quietly"
    ended = f"  ↳ {parent}.worker-1 ended: completed (tokens in 10 / out 5)"
    assert _status_lines(err) == [started, ended]
    [wait] = [i for i, line in enumerate(lines) if line.startswith("→ subagent_wait ")]
    [collected] = [i for i, line in enumerate(lines) if line.startswith("← ok: background answer")]
    # The child may start before or after the first call's result; it ends before the wait
    # returns its answer.
    assert lines.index(started) < lines.index(ended) < collected
    assert wait < collected
    assert result.stdout.decode() == "Collected.\n"


async def test_chat_prints_the_child_status_lines(tmp_path: Path) -> None:
    answer = _model("summarise", child=lambda _: sse_reply("a summary"))
    async with open_fake_openai_server([answer] * 3) as server:
        _config(tmp_path, server.base_url)
        result = await run_cli(tmp_path, "chat", stdin=b"please delegate\n")
    err = result.stderr.decode()
    assert result.returncode == 0, err
    parent = _session_of(err)
    assert _status_lines(err) == [
        f"  ↳ {parent}.worker-1 started: summarise",
        f"  ↳ {parent}.worker-1 ended: completed (tokens in 10 / out 5)",
    ]
    assert "All done." in result.stdout.decode()


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("plain", 120, "plain"),
        ("  two\n\tlines  ", 120, "two lines"),
        ("\x1b[2Jx", 120, "\\x1b[2Jx"),
        (
            "bell\x07 del\x7f c1\x9b bidi\u202e nbsp\xa0.",
            120,
            "bell\\x07 del\\x7f c1\\x9b bidi\\u202e nbsp .",
        ),
        ("x" * 200, 10, "x" * 9 + "…"),
        ("ab\x1bcd", 5, "ab…"),  # never half an escape
        ("\x1b" * 50, 9, "\\x1b\\x1b…"),
    ],
)
def test_clean_makes_one_printable_line(text: str, limit: int, expected: str) -> None:
    assert clean(text, limit) == expected
    assert len(clean(text, limit)) <= limit
