"""Background children: held in the parent agent's scope nursery, collected with
``subagent_wait``, closed in the parent's stop/drain phase."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_agent.subagents import START_EVENT, SubagentRequest, UnknownHandleError, subagent_links
from trio_agent.testing import ScriptedResponse, hang, tool_call
from trio_agent.tools import INVALID_ARGS

from .helpers import (
    Scripts,
    agent_ids,
    assert_balanced,
    open_subagents,
    record_sessions,
    slow,
    tool_results,
    turn_ends,
)


def _background(call_id: str, task: str = "long job") -> ScriptedResponse:
    return tool_call(call_id, "subagent", {"task": task, "background": True})


async def test_a_background_child_outlives_its_turn_and_is_collected(
    autojump_clock: object,
) -> None:
    handle = "p.worker-1"
    scripts: Scripts = {
        "": [
            _background("c1"),
            "I started it.",
            tool_call("c2", "subagent_status", {}),
            "still going",
            tool_call("c3", "subagent_wait", {"handle": handle}),
            "collected",
        ],
        "worker-1": [tool_call("s", "slow", {"seconds": 50}), "the long answer"],
    }
    async with open_subagents(scripts, tools=[slow]) as (h, service, _router):
        sessions = record_sessions(h)
        parent = h.agent("p")
        parent.send("start it")
        await parent.wait_idle()
        assert turn_ends(parent.session) == ["completed"]
        started = tool_results(parent.session)[0].result.text
        assert f"Handle: {handle}" in started
        # The turn is over; the child is not. Its link was logged inside the turn.
        assert agent_ids(h) == ["p", handle]
        (link,) = subagent_links(parent.session)
        assert (link.agent_id, link.call_id, link.background) == (handle, "c1", True)
        kinds = [e.type for e in parent.session.events]
        assert kinds.index(START_EVENT) < kinds.index("turn/end")
        (status,) = service.status(parent)
        assert (status.handle, status.state, status.result) == (handle, "running", None)

        parent.send("how is it going?")
        await parent.wait_idle()
        assert "- p.worker-1 (worker, session" in tool_results(parent.session)[1].result.text
        assert ": running" in tool_results(parent.session)[1].result.text

        parent.send("collect it")
        await parent.wait_idle()
        collected = tool_results(parent.session)[2].result
        assert not collected.is_error
        assert collected.text.startswith("the long answer")
        assert f"agent {handle}, reason completed" in collected.text
        assert agent_ids(h) == ["p"]
        (status,) = service.status(parent)
        assert status.state == "done"
        assert status.result is not None and status.result.ok
        child = sessions[-1]
        assert child.detached and turn_ends(child) == ["completed"]
        assert_balanced(child)


async def test_a_background_child_is_closed_with_its_parent_before_it_is_unregistered(
    autojump_clock: object,
) -> None:
    scripts: Scripts = {"": [_background("c1"), "started"], "worker-1": [hang("working")]}
    async with open_subagents(scripts) as (h, _, _router):
        order: list[tuple[str, str]] = []
        h.ctx.on("agent/turn-end", lambda e: order.append((f"turn-end {e.reason}", e.agent.id)))
        h.ctx.on("agent/status", lambda e: order.append((f"status {e.status}", e.agent.id)))
        h.ctx.on("agent/disposed", lambda e: order.append(("disposed", e.agent.id)))
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        await trio.sleep(5)
        since = len(order)
        await parent.aclose()
        assert order[since:] == [
            ("turn-end aborted", "p.worker-1"),
            ("status idle", "p.worker-1"),
            ("status disposed", "p.worker-1"),
            ("disposed", "p.worker-1"),
            ("status disposed", "p"),
            ("disposed", "p"),
        ]
        assert agent_ids(h) == []


async def test_waiting_gives_up_after_its_timeout(autojump_clock: object) -> None:
    scripts: Scripts = {
        "": [
            _background("c1"),
            tool_call("c2", "subagent_wait", {"handle": "p.worker-1", "timeout": 3}),
            "later",
        ],
        "worker-1": [hang()],
    }
    async with open_subagents(scripts) as (h, _, _router):
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        waited = tool_results(parent.session)[1].result
        assert not waited.is_error
        assert waited.text.startswith("Still running after waiting 3s.")
        assert agent_ids(h) == ["p", "p.worker-1"]
        await parent.aclose()
        assert agent_ids(h) == []


async def test_handles_belong_to_the_parent_that_started_them(autojump_clock: object) -> None:
    scripts: Scripts = {
        "worker-1": ["done"],
        "": [tool_call("c1", "subagent_wait", {"handle": "a.worker-1"}), "ok"],
    }
    async with open_subagents(scripts) as (h, service, _router):
        first = h.agent("a")
        started = await service.run(SubagentRequest(parent=first, task="t", background=True))
        assert started.reason == "running"
        assert (await service.wait(first, started.agent_id)).text == "done"
        other = h.agent("b")
        with pytest.raises(UnknownHandleError, match="started none"):
            await service.wait(other, started.agent_id)
        with pytest.raises(UnknownHandleError, match=r"its handles are: a\.worker-1"):
            service.status(first, "a.worker-9")
        assert service.status(other) == ()
        other.send("steal it")
        await other.wait_idle()
        (result,) = tool_results(other.session)
        assert result.result.code == INVALID_ARGS
        assert "no background sub-agent 'a.worker-1' was started by agent 'b'" in result.result.text


async def test_background_can_be_disabled(autojump_clock: object) -> None:
    scripts: Scripts = {"": [_background("c1"), "ok"]}
    async with open_subagents(scripts, background=False) as (h, _, _router):
        assert {t.name for t in h.ctx.tools.schemas()} == {"subagent"}
        assert "background" not in h.ctx.tools.get("subagent").parameters["properties"]
        assert "subagent_wait" not in h.ctx.tools.get("subagent").description
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        (result,) = tool_results(parent.session)
        assert result.result.code == INVALID_ARGS
        assert "background sub-agents are disabled" in result.result.text


async def test_unloading_the_service_ends_background_children(autojump_clock: object) -> None:
    async with open_subagents({"worker-1": [hang()], "worker-2": [hang()]}, max_parallel=1) as (
        h,
        service,
        _router,
    ):
        parent = h.agent("p")
        running = await service.run(SubagentRequest(parent=parent, task="t", background=True))
        waiting = await service.run(SubagentRequest(parent=parent, task="t", background=True))
        await trio.testing.wait_all_tasks_blocked()
        assert [s.state for s in service.status(parent)] == ["running", "pending"]
        await h.ctx.subagents.ctx.fiber.dispose()
        first = await service.wait(parent, running.agent_id)
        second = await service.wait(parent, waiting.agent_id)
        assert first.reason in ("aborted", "disposed")
        assert second.reason == "aborted"
        assert "was cancelled before it started" in (second.error or "")
        assert agent_ids(h) == ["p"]


async def test_agent_tasks_stop_before_the_agent_is_unregistered(autojump_clock: object) -> None:
    # The loop seam background children rely on: agent.ctx tasks end in stop/drain.
    async with open_subagents() as (h, _, _router):
        order: list[str] = []
        parent = h.agent("p")
        parent.ctx.on("agent/disposed", lambda e: order.append("disposed"))

        async def task() -> None:
            try:
                await trio.sleep_forever()
            finally:
                order.append("task stopped")

        parent.ctx.start_soon(task)
        await trio.testing.wait_all_tasks_blocked()
        await parent.aclose()
        assert order == ["task stopped", "disposed"]
