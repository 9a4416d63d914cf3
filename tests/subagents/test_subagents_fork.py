"""``mode: "fork"``: the child starts from the parent's log up to its last closed turn."""

from __future__ import annotations

from trio_agent.subagents import SubagentRequest, subagent_info
from trio_agent.testing import text, tool_call

from .helpers import Scripts, assert_balanced, open_subagents, record_sessions, tool_results


async def test_a_fork_sees_the_closed_turns_and_nothing_of_the_open_one(
    autojump_clock: object,
) -> None:
    fork = tool_call("c1", "subagent", {"task": "summarise what we did", "mode": "fork"})
    scripts: Scripts = {
        "": [text("hi there"), text("Let me delegate.") + fork, "done"],
        "worker-1": ["we said hello"],
    }
    async with open_subagents(scripts) as (h, _, router):
        sessions = record_sessions(h)
        parent = h.agent("p")
        parent.inject("background context")
        parent.send("hello")
        await parent.wait_idle()
        closed = len(parent.session.events)  # everything up to turn 1's turn/end
        parent.send("please delegate this")
        await parent.wait_idle()

        (request,) = router.requests["worker-1"]
        texts = [m.text for m in request.messages]
        assert texts == ["background context", "hello", "hi there", "summarise what we did"]
        assert not any("delegate" in t for t in texts)
        child = sessions[-1]
        assert child.header.parent_session == parent.session.id
        assert child.header.seed_length == closed
        assert [e.type for e in child.events[closed - 1 : closed + 1]] == [
            "turn/end",
            "session/end-seed",
        ]
        assert subagent_info(child).mode == "fork"  # type: ignore[union-attr]
        assert_balanced(child)
        # The child's own turn continues the numbering of the log it was seeded with.
        assert [e.data["turn"] for e in child.events if e.type == "turn/start"] == [1, 2]
        assert tool_results(parent.session)[0].result.text.startswith("we said hello")


async def test_a_fork_in_the_first_turn_has_only_what_came_before_it(
    autojump_clock: object,
) -> None:
    fork = tool_call("c1", "subagent", {"task": "go on", "mode": "fork"})
    scripts: Scripts = {"": [fork, "done"], "worker-1": ["ok"]}
    async with open_subagents(scripts) as (h, _, router):
        sessions = record_sessions(h)
        parent = h.agent("p")
        parent.send("first prompt")
        await parent.wait_idle()
        (request,) = router.requests["worker-1"]
        assert [m.text for m in request.messages] == ["go on"]
        child = sessions[-1]
        assert child.header.parent_session == parent.session.id
        assert child.header.seed_length == 0


async def test_forking_an_idle_parent_takes_its_whole_log(autojump_clock: object) -> None:
    scripts = {"": ["answer one"], "worker-1": ["ok"]}
    async with open_subagents(scripts) as (h, service, router):
        parent = h.agent("p")
        parent.send("question one")
        await parent.wait_idle()
        result = await service.run(SubagentRequest(parent=parent, task="more", mode="fork"))
        assert result.ok
        (request,) = router.requests["worker-1"]
        assert [m.text for m in request.messages] == ["question one", "answer one", "more"]
