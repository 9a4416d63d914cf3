"""Running a child through the ``subagent`` tool and ``ctx.subagents.run``: ids, prompt, tools,
model choice, usage, results and failures."""

from __future__ import annotations

import json

import pytest
import trio

from trio_agent.agent import AgentOptions
from trio_agent.llm import GenerateRequest, Usage
from trio_agent.subagents import (
    START_EVENT,
    SubagentDefinition,
    SubagentError,
    SubagentNotice,
    SubagentRequest,
    UnknownSubagentError,
    subagent_info,
    subagent_links,
)
from trio_agent.testing import ScriptItem, error, text, tool_call
from trio_agent.tools import DENIED, INVALID_ARGS, TOOL_ERROR, ToolConflictError, tool

from .helpers import (
    WORKER,
    Scripts,
    agent_ids,
    assert_balanced,
    lookup,
    notices,
    open_subagents,
    record_sessions,
    tool_results,
)

REVIEWER = SubagentDefinition("reviewer", "Reviews diffs.", "List concrete bugs only.")


async def test_the_tool_runs_a_child_and_returns_its_answer(autojump_clock: object) -> None:
    scripts = {
        "": [tool_call("c1", "subagent", {"task": "count the files"}), text("there are 3")],
        "worker-1": [text("3 files").with_usage(Usage(10, 4))],
    }
    async with open_subagents(scripts) as (h, _, router):
        sessions = record_sessions(h)
        seen: list[SubagentNotice] = []
        parent = h.agent("p")
        notices(parent, seen)
        parent.send("go")
        await parent.wait_idle()

        (result,) = tool_results(parent.session)
        assert not result.result.is_error
        answer, footer = result.result.text.split("\n\n")
        child_session = f"{parent.session.id}.worker-1"
        assert answer == "3 files"
        assert footer == (
            f"[subagent worker: session {child_session}, agent p.worker-1, reason completed, "
            "tokens in 10 out 4]"
        )
        # The child is gone; its session was its own, under the documented ids.
        assert agent_ids(h) == ["p"]
        (child,) = [s for s in sessions if s.id == child_session]
        assert child.detached
        assert_balanced(child)
        assert_balanced(parent.session)
        # The child's only prompt is the task.
        (request,) = router.requests["worker-1"]
        assert [m.text for m in request.messages] == ["count the files"]
        # The link is in the parent's log, structured.
        (link,) = subagent_links(parent.session)
        assert (link.call_id, link.agent_id, link.session_id) == ("c1", "p.worker-1", child.id)
        kinds = [e.type for e in parent.session.events]
        assert kinds.index("tool/call") < kinds.index(START_EVENT) < kinds.index("tool/result")
        # Notices: started, then ended with the reason and the usage.
        assert [(n.kind, n.child_id, n.call_id) for n in seen] == [
            ("started", "p.worker-1", "c1"),
            ("ended", "p.worker-1", "c1"),
        ]
        assert (seen[1].reason, seen[1].usage, seen[1].error) == ("completed", Usage(10, 4), None)


async def test_instructions_are_an_agent_scoped_section_not_a_second_persona(
    autojump_clock: object,
) -> None:
    scripts: Scripts = {
        "": [tool_call("c1", "subagent", {"task": "t"}), "ok"],
        "worker-1": ["done"],
    }
    async with open_subagents(scripts) as (h, _, router):
        h.ctx.system_prompt.section("rules", "Shared rules.", order=10)
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        parent_system = router.requests[""][0].system
        child_system = router.requests["worker-1"][0].system
        assert parent_system == "Shared rules."
        assert child_system is not None
        assert child_system.startswith("Shared rules.\n\n")
        assert child_system.count("Shared rules.") == 1
        assert WORKER.instructions in child_system
        assert WORKER.instructions not in (router.requests[""][1].system or "")


async def test_the_description_lists_definitions_and_follows_registration(
    autojump_clock: object,
) -> None:
    async with open_subagents(definitions=()) as (h, service, _):
        assert h.ctx.tools.get("subagent") is None  # nothing to delegate to: no tool
        off = service.register(WORKER)
        schema = h.ctx.tools.get("subagent").schema
        assert "- worker: Does a piece of work." in schema.description
        assert 'Omit "agent" to use worker.' in schema.description
        assert schema.parameters["properties"]["agent"]["enum"] == ["worker"]
        assert schema.parameters["required"] == ["task"]
        assert h.ctx.tools.is_concurrency_safe("subagent")
        service.register(REVIEWER)
        schema = h.ctx.tools.get("subagent").schema
        assert "- reviewer: Reviews diffs." in schema.description
        assert schema.parameters["properties"]["agent"]["enum"] == ["worker", "reviewer"]
        assert [d.name for d in service.list()] == ["worker", "reviewer"]
        assert service.get("reviewer") is REVIEWER
        with pytest.raises(SubagentError, match="registered already"):
            service.register(WORKER)
        off()
        assert service.get("worker") is None
        assert "worker" not in h.ctx.tools.get("subagent").schema.description
        assert {s.name for s in h.ctx.tools.schemas()} == {
            "subagent",
            "subagent_status",
            "subagent_wait",
        }


async def test_choosing_a_definition(autojump_clock: object) -> None:
    calls = (
        tool_call("c1", "subagent", {"task": "t"})
        + tool_call("c2", "subagent", {"task": "t", "agent": "nobody"})
        + tool_call("c3", "subagent", {"task": "  ", "agent": "reviewer"})
        + tool_call("c4", "subagent", {"task": "t", "agent": "reviewer", "mode": "clone"})
        + tool_call("c5", "subagent", {"task": "t", "agent": "reviewer"})
    )
    scripts: Scripts = {"": [calls, "ok"], "reviewer-1": ["reviewed"]}
    async with open_subagents(scripts, definitions=(WORKER, REVIEWER)) as (h, _, _router):
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        results = [r.result for r in tool_results(parent.session)]
        assert [r.code for r in results] == [INVALID_ARGS] * 4 + [None]
        assert "no sub-agent named: choose one of worker, reviewer" in results[0].text
        assert "unknown sub-agent 'nobody'; choose one of worker, reviewer" in results[1].text
        assert "the task is empty" in results[2].text
        assert "$.mode" in results[3].text
        assert results[4].text.startswith("reviewed")


async def test_a_failing_child_is_a_tool_error_naming_its_session(autojump_clock: object) -> None:
    scripts: Scripts = {
        "": [tool_call("c1", "subagent", {"task": "t"}), "ok"],
        "worker-1": [error("AUTH", "bad key")],
    }
    async with open_subagents(scripts) as (h, _, _router):
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        (result,) = tool_results(parent.session)
        assert result.result.code == TOOL_ERROR
        assert result.result.is_error
        session = f"{parent.session.id}.worker-1"
        assert result.result.text.startswith(
            f'Error: subagent "worker" (session {session}) failed: AUTH: bad key'
        )
        assert f"session {session}, agent p.worker-1, reason error" in result.result.text
        assert parent.status == "idle"


async def test_a_child_that_cannot_start_is_a_tool_error_naming_its_session(
    autojump_clock: object,
) -> None:
    broken = SubagentDefinition("worker", "d", "i", tools=("no_such_tool",))
    scripts: Scripts = {"": [tool_call("c1", "subagent", {"task": "t"}), "ok"]}
    async with open_subagents(scripts, definitions=(broken,)) as (h, _, _router):
        sessions = record_sessions(h)
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        (result,) = tool_results(parent.session)
        assert result.result.code == TOOL_ERROR
        assert f"(session {parent.session.id}.worker-1) could not be started" in result.result.text
        assert "no_such_tool" in result.result.text
        assert [s.id for s in sessions] == [parent.session.id]  # nothing was published
        assert agent_ids(h) == ["p"]


async def test_tools_model_and_options_of_a_child(autojump_clock: object) -> None:
    limited = SubagentDefinition("worker", "d", "i", tools=("lookup",), model="small")
    other = SubagentDefinition("other", "d", "i", provider="scripted")
    calls = tool_call("c1", "subagent", {"task": "t", "agent": "worker"}) + tool_call(
        "c2", "subagent", {"task": "t", "agent": "other"}
    )
    scripts: Scripts = {
        "": [calls, "ok"],
        "worker-1": [tool_call("w1", "lookup", {"key": "k"}), "found it"],
        "other-1": ["fine"],
    }
    async with open_subagents(scripts, definitions=(limited, other), tools=[lookup]) as (
        h,
        _,
        router,
    ):
        parent = h.agent("p", AgentOptions(model="big", temperature=0.5))
        parent.send("go")
        await parent.wait_idle()
        worker = router.requests["worker-1"][0]
        assert [t.name for t in worker.tools] == ["lookup"]
        assert (worker.config.model, worker.config.temperature) == ("small", 0.5)
        other_request = router.requests["other-1"][0]
        # A definition naming a provider does not inherit the parent's model name.
        assert other_request.config.model == "scripted-model"
        assert {t.name for t in other_request.tools} >= {"lookup", "subagent"}
        answer = router.requests["worker-1"][1].messages[-1]
        assert answer.content[0].content[0].text == "value of k"  # type: ignore[union-attr]


async def test_the_child_is_recorded_in_its_header(
    autojump_clock: object, tmp_path: object
) -> None:
    scripts: Scripts = {
        "": [tool_call("c1", "subagent", {"task": "t"}), "ok"],
        "worker-1": ["done"],
    }
    async with open_subagents(scripts) as (h, _, _router):
        sessions = record_sessions(h)
        parent = h.ctx.agent_loop.create("p", meta={"cwd": "/srv/work"})
        parent.send("go")
        await parent.wait_idle()
        child = sessions[-1]
        assert child.header.cwd == "/srv/work"
        assert child.header.parent_session is None  # spawned: not a fork of anything
        info = subagent_info(child)
        assert info is not None
        assert (info.definition, info.parent_agent, info.parent_session) == (
            "worker",
            "p",
            parent.session.id,
        )
        assert (info.depth, info.max_depth, info.mode) == (1, 3, "spawn")
        assert subagent_info(parent) is None


async def test_run_from_code(autojump_clock: object) -> None:
    scripts = {"worker-1": ["first"], "worker-2": ["second"]}
    async with open_subagents(scripts) as (h, service, _router):
        parent = h.agent("p")
        first = await service.run(SubagentRequest(parent=parent, task="a"))
        second = await h.ctx.subagents.run(SubagentRequest(parent=parent, task="b"))
        assert (first.text, first.ok, first.reason, first.agent_id) == (
            "first",
            True,
            "completed",
            "p.worker-1",
        )
        assert (second.text, second.session_id) == ("second", f"{parent.session.id}.worker-2")
        assert subagent_links(parent.session)[0].call_id is None
        with pytest.raises(UnknownSubagentError):
            await service.run(SubagentRequest(parent=parent, task="a", agent="x"))
        with pytest.raises(ValueError, match="empty"):
            await service.run(SubagentRequest(parent=parent, task=""))
        await parent.aclose()
        with pytest.raises(SubagentError, match="not a live agent"):
            await service.run(SubagentRequest(parent=parent, task="a"))


async def test_a_call_outside_an_agent_is_refused(autojump_clock: object) -> None:
    from trio_agent.ids import CallId
    from trio_agent.tools import ToolInvocation

    async with open_subagents() as (h, _, _router):
        result = await h.ctx.tools.execute(
            ToolInvocation(CallId("x"), "subagent", json.dumps({"task": "t"}))
        )
        assert result.code == TOOL_ERROR
        assert "must be called by a live agent" in result.text


async def test_calls_in_one_message_run_in_parallel_results_in_model_order(
    autojump_clock: object,
) -> None:
    calls = tool_call("c1", "subagent", {"task": "slow"}) + tool_call(
        "c2", "subagent", {"task": "fast"}
    )
    running: list[int] = []
    peak: list[int] = [0]

    @tool
    async def work(seconds: float) -> str:
        """Work for a while.

        Args:
            seconds: How long.
        """
        running.append(1)
        peak[0] = max(peak[0], len(running))
        try:
            await trio.sleep(seconds)
        finally:
            running.pop()
        return "worked"

    def task(request: GenerateRequest) -> str:
        # Which child got which call depends on which body started first (the two wait on one
        # write-ahead flush), so each child answers from its task, not from its number.
        return "slow" if "slow" in request.messages[0].text else "fast"

    child: list[ScriptItem] = [
        lambda r: tool_call("w", "work", {"seconds": 5 if task(r) == "slow" else 1}),
        lambda r: f"{task(r)} done",
    ]
    scripts: Scripts = {"": [calls, "ok"], "worker-1": child, "worker-2": child}
    async with open_subagents(scripts, tools=[work]) as (h, _, _router):
        parent = h.agent("p")
        start = trio.current_time()
        parent.send("go")
        await parent.wait_idle()
        assert trio.current_time() - start < 6  # overlapped: 5 s, not 6 s
        assert peak[0] == 2
        results = tool_results(parent.session)
        assert [r.call_id for r in results] == ["c1", "c2"]
        assert [r.result.text.split("\n")[0] for r in results] == ["slow done", "fast done"]


async def test_parallelism_is_bounded_per_parent(autojump_clock: object) -> None:
    calls = tool_call("c1", "subagent", {"task": "a"})
    for n in range(2, 5):
        calls = calls + tool_call(f"c{n}", "subagent", {"task": "x"})
    live: list[int] = []
    peak = [0]

    @tool
    async def work() -> str:
        """Work."""
        live.append(1)
        peak[0] = max(peak[0], len(live))
        await trio.sleep(1)
        live.pop()
        return "ok"

    scripts: dict[str, list[object]] = {"": [calls, "ok"]}
    for n in range(1, 5):
        scripts[f"worker-{n}"] = [tool_call("w", "work"), "done"]
    async with open_subagents(scripts, tools=[work], max_parallel=2) as (h, _, _router):  # type: ignore[arg-type]
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        assert peak[0] == 2
        assert [r.result.code for r in tool_results(parent.session)] == [None] * 4


async def test_the_depth_error_code_is_denied(autojump_clock: object) -> None:
    # Covered in depth by test_subagents_depth; here only the mapping to DENIED.
    scripts: Scripts = {"": [tool_call("c1", "subagent", {"task": "t"}), "ok"]}
    async with open_subagents(scripts, max_depth=1) as (h, _, _router):
        child_meta = {
            "subagent": {
                "definition": "worker",
                "parent_agent": "x",
                "parent_session": "x",
                "depth": 1,
                "max_depth": 1,
                "mode": "spawn",
            }
        }
        parent = h.ctx.agent_loop.create("deep", meta=child_meta)
        parent.send("go")
        await parent.wait_idle()
        (result,) = tool_results(parent.session)
        assert result.result.code == DENIED


async def test_a_tool_name_taken_by_another_plugin_refuses_the_definition(
    autojump_clock: object,
) -> None:
    @tool(name="subagent")
    async def impostor() -> str:
        """Not ours."""
        return "?"

    async with open_subagents(definitions=(), tools=[impostor]) as (h, service, _router):
        with pytest.raises(ToolConflictError, match='"subagent" is already registered'):
            service.register(WORKER)
        assert service.list() == ()
        assert h.ctx.tools.get("subagent") is impostor
        assert h.ctx.tools.get("subagent_wait") is None
