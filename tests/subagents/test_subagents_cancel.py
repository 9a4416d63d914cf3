"""A child lives inside its parent's tool call: cancelling the parent's turn aborts the child's,
disposing the parent disposes the child first, and nothing is left behind."""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent.llm import GenerateRequest
from trio_agent.session import Session
from trio_agent.subagents import SubagentNotice, SubagentRequest, subagent_links
from trio_agent.testing import (
    ScriptedResponse,
    TaskLeakCheck,
    assert_no_leaked_tasks,
    hang,
    text,
    tool_call,
)
from trio_agent.tools import ABORTED, ABORTED_BEFORE_DISPATCH

from .helpers import (
    agent_ids,
    assert_balanced,
    open_subagents,
    record_sessions,
    slow,
    tool_results,
    turn_ends,
)


def _children(sessions: list[Session], parent: Session) -> list[Session]:
    return [s for s in sessions if s.id.startswith(f"{parent.id}.")]


async def test_cancelling_the_parent_turn_aborts_the_child_turn(autojump_clock: object) -> None:
    scripts = {
        "": [tool_call("c1", "subagent", {"task": "t"}), text("next turn works")],
        "worker-1": [hang("thinking")],
    }
    async with open_subagents(scripts) as (h, _, _router):
        sessions = record_sessions(h)
        parent = h.agent("p")
        started = trio.Event()
        parent.ctx.on("agent/subagent", lambda n: started.set() if n.kind == "started" else None)
        parent.send("go")
        await started.wait()
        await trio.testing.wait_all_tasks_blocked()
        parent.cancel()
        with trio.fail_after(30):
            await parent.wait_idle()
        (child,) = _children(sessions, parent.session)
        assert turn_ends(child) == ["aborted"]
        assert child.detached
        (result,) = tool_results(parent.session)
        assert result.result.code == ABORTED
        assert turn_ends(parent.session) == ["aborted"]
        assert subagent_links(parent.session)[0].session_id == child.id
        for session in (parent.session, child):
            assert_balanced(session)
        assert agent_ids(h) == ["p"]
        parent.send("again")
        await parent.wait_idle()
        assert turn_ends(parent.session) == ["aborted", "completed"]


async def test_disposing_the_parent_disposes_its_children_first(autojump_clock: object) -> None:
    calls = tool_call("c1", "subagent", {"task": "a"}) + tool_call("c2", "subagent", {"task": "b"})
    scripts = {
        "": [calls],
        "worker-1": [hang("working")],
        "worker-2": [tool_call("s", "slow", {"seconds": 100})],
    }
    async with open_subagents(scripts, tools=[slow]) as (h, _, _router):
        order: list[tuple[str, str, str]] = []
        h.ctx.on("agent/turn-end", lambda e: order.append(("turn-end", e.agent.id, e.reason)))
        h.ctx.on("agent/disposed", lambda e: order.append(("disposed", e.agent.id, "")))
        h.ctx.on("session/disposed", lambda e: order.append(("session", e.session.id, "")))
        parent = h.agent("p")
        running: list[str] = []
        parent.ctx.on(
            "agent/subagent", lambda n: running.append(n.child_id) if n.kind == "started" else None
        )
        parent.send("go")
        while len(running) < 2:
            await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(3)
        await parent.aclose()
        # Each child's turn ends and the child is gone before the parent's turn even ends;
        # then the parent's own teardown runs in its documented order.
        parent_end = order.index(("turn-end", "p", "disposed"))
        for child in ("p.worker-1", "p.worker-2"):
            child_end = order.index(("turn-end", child, "aborted"))
            assert child_end < order.index(("disposed", child, "")) < parent_end
        assert order[parent_end:] == [
            ("turn-end", "p", "disposed"),
            ("disposed", "p", ""),
            ("session", parent.session.id, ""),
        ]
        assert agent_ids(h) == []
        assert [r.result.code for r in tool_results(parent.session)] == [ABORTED, ABORTED]


async def test_closing_the_runtime_mid_child_leaves_nothing(autojump_clock: object) -> None:
    sessions: list[Session] = []
    with assert_no_leaked_tasks():
        scripts = {"": [tool_call("c1", "subagent", {"task": "t"})], "worker-1": [hang()]}
        async with open_subagents(scripts) as (h, _, _router):
            sessions = record_sessions(h)
            parent = h.agent("p")
            parent.send("go")
            while len(sessions) < 2:
                await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(1)
    parent_session, child = sessions
    assert turn_ends(child) in (["aborted"], ["disposed"])
    assert turn_ends(parent_session) == ["disposed"]
    for session in sessions:
        assert_balanced(session)


# --- the property: three children in parallel, cancelled at a random moment -------------------

_KINDS = st.sampled_from(["stream", "tool", "hang", "tool-then-stream"])


def _child_script(kind: str) -> list[Any]:
    if kind == "stream":
        return [text(*["token "] * 60)]
    if kind == "tool":
        return [text("let me look") + tool_call("s", "slow", {"seconds": 100}), "never"]
    if kind == "tool-then-stream":
        return [tool_call("s", "slow", {"seconds": 2}), text(*["more "] * 60)]
    return [hang("partial")]


@settings(max_examples=80, deadline=None)
@given(
    kinds=st.lists(_KINDS, min_size=3, max_size=3),
    phase=st.sampled_from(["from-send", "at-first-start", "after-all-started"]),
    moment=st.floats(min_value=0.0, max_value=30.0),
    settle=st.booleans(),
)
def test_three_parallel_children_cancelled_at_a_random_moment(
    kinds: list[str], phase: str, moment: float, settle: bool
) -> None:
    """``from-send``: a moment after the prompt (the parent may still be streaming its calls);
    ``at-first-start``: inside the first child's ``started`` notice (the others not yet made);
    ``after-all-started``: a moment after all three children started."""

    async def main() -> None:
        with assert_no_leaked_tasks() as check:
            await scenario(check)

    async def scenario(check: TaskLeakCheck) -> None:
        calls = tool_call("c1", "subagent", {"task": "one"}, chunks=3)
        for n in (2, 3):
            calls = calls + tool_call(f"c{n}", "subagent", {"task": f"task {n}"}, chunks=3)

        def parent_model(request: GenerateRequest) -> ScriptedResponse:
            # A cancel that lands before the turn starts leaves no turn: the next prompt must
            # still get a plain answer.
            return text("next turn") if request.messages[-1].text == "again" else calls

        scripts: dict[str, list[Any]] = {"": [parent_model] * 2, "worker-1": ["warm"]}
        for n, kind in enumerate(kinds, start=2):
            scripts[f"worker-{n}"] = _child_script(kind)
        async with open_subagents(scripts, tools=[slow], delay=1.0) as (h, service, _router):
            sessions = record_sessions(h)
            parent = h.agent("p")
            # One child run first, so the service's nursery exists in the baseline.
            await service.run(SubagentRequest(parent=parent, task="warm up"))
            await trio.testing.wait_all_tasks_blocked()
            baseline = Counter(task.name for task in check.live)
            since = len(parent.session.events)
            started: list[str] = []

            def on_notice(notice: SubagentNotice) -> None:
                if notice.kind == "started":
                    started.append(notice.child_id)
                    if phase == "at-first-start" and len(started) == 1:
                        parent.cancel()

            parent.ctx.on("agent/subagent", on_notice)
            parent.send("go")
            if phase == "after-all-started":
                while len(started) < 3:
                    await trio.sleep(0.5)
            if phase != "at-first-start":
                await trio.sleep(moment)
                if settle:
                    await trio.testing.wait_all_tasks_blocked()
                parent.cancel()
            with trio.fail_after(60):
                await parent.wait_idle()
            await trio.testing.wait_all_tasks_blocked()

            # Zero tasks of the cancelled turn remain: no child host, no holder, no pump.
            assert Counter(task.name for task in check.live) == baseline
            assert agent_ids(h) == ["p"]
            children = _children(sessions, parent.session)[1:]
            for child in children:
                assert child.detached
                assert turn_ends(child) in (["aborted"], [])
                assert_balanced(child)
            assert_balanced(parent.session)
            assert turn_ends(parent.session) in ([], ["aborted"])
            # Every started child's call is ABORTED; calls that never started are
            # ABORTED_BEFORE_DISPATCH; nothing else.
            turn_events = parent.session.events[since:]
            started_calls = {link.call_id for link in subagent_links(turn_events)}
            assert len(started_calls) == len(children)
            for result in tool_results(parent.session):
                expected = ABORTED if result.call_id in started_calls else ABORTED_BEFORE_DISPATCH
                assert result.result.code in (ABORTED, expected), result
                if result.call_id in started_calls:
                    assert result.result.code == ABORTED

            parent.send("again")
            with trio.fail_after(60):
                await parent.wait_idle()
            assert turn_ends(parent.session)[-1] == "completed"

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
