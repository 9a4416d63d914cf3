"""The depth limit (recorded in each child's header, enforced on resume) and child ids that stay
unique across a parent's resume."""

from __future__ import annotations

from typing import Any

from trio_agent.ids import SessionId
from trio_agent.persistence import MemoryPersistence, MemoryStorage
from trio_agent.subagents import subagent_info, subagent_links
from trio_agent.testing import ScriptedResponse, tool_call
from trio_agent.tools import DENIED

from .helpers import Scripts, agent_ids, open_subagents, record_sessions, tool_results


def _delegate(call_id: str) -> ScriptedResponse:
    return tool_call(call_id, "subagent", {"task": "go deeper"})


async def test_a_child_at_the_depth_limit_is_denied_with_the_reason(autojump_clock: object) -> None:
    scripts: Scripts = {
        "": [_delegate("c1"), "top done"],
        "worker-1": [_delegate("c2"), "child done"],
        "worker-1.worker-1": [_delegate("c3"), "grandchild done"],
    }
    async with open_subagents(scripts, max_depth=2) as (h, _, _router):
        sessions = record_sessions(h)
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        by_id = {s.id: s for s in sessions}
        child = by_id[SessionId(f"{parent.session.id}.worker-1")]
        grandchild = by_id[SessionId(f"{child.id}.worker-1")]
        assert len(sessions) == 3  # no great-grandchild was made
        info = subagent_info(grandchild)
        assert info is not None
        assert (info.depth, info.max_depth, info.parent_agent) == (2, 2, "p.worker-1")
        (denied,) = tool_results(grandchild)
        assert denied.result.code == DENIED
        assert denied.result.text == (
            "Error: agent 'p.worker-1.worker-1' is a sub-agent at depth 2 and the sub-agent depth "
            "limit is 2 (the subagents config max_depth); it cannot start another level of "
            "sub-agents, so do this task yourself"
        )
        assert tool_results(parent.session)[0].result.text.startswith("child done")


async def test_the_recorded_limit_holds_when_a_child_is_resumed(autojump_clock: object) -> None:
    storage = MemoryStorage()
    persistence: dict[str, Any] = {
        "persistence": MemoryPersistence,
        "persistence_config": MemoryPersistence.Config(storage=storage),
    }
    scripts: Scripts = {"": [_delegate("c1"), "top done"], "worker-1": ["child done"]}
    async with open_subagents(scripts, max_depth=1, **persistence) as (h, _, _router):
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        child_id = subagent_links(parent.session)[0].session_id

    # A later run with a looser config resumes the child itself: its header's limit still holds.
    scripts = {"worker-1": [_delegate("c2"), "resumed child done"]}
    async with open_subagents(scripts, max_depth=3, **persistence) as (h, _, _router):
        handle = await h.ctx.agents.resume(agent_id="again", resume_session_id=child_id)
        child = handle.agent
        child.send("continue")
        await child.wait_idle()
        denied = tool_results(child.session)[-1]
        assert denied.result.code == DENIED
        assert "limit is 1 (recorded in its session header)" in denied.result.text
        await handle.aclose()


async def test_child_numbers_continue_after_the_parent_resumes(autojump_clock: object) -> None:
    storage = MemoryStorage()
    persistence: dict[str, Any] = {
        "persistence": MemoryPersistence,
        "persistence_config": MemoryPersistence.Config(storage=storage),
    }
    scripts: Scripts = {"": [_delegate("c1"), "first done"], "worker-1": ["one"]}
    async with open_subagents(scripts, **persistence) as (h, _, _router):
        parent = h.agent("p")
        parent.send("go")
        await parent.wait_idle()
        parent_id = parent.session.id

    scripts = {"": [_delegate("c2"), "second done"], "worker-2": ["two"]}
    async with open_subagents(scripts, **persistence) as (h, _, _router):
        handle = await h.ctx.agents.resume(agent_id="p", resume_session_id=parent_id)
        parent = handle.agent
        # Resuming the parent resumes none of its children.
        assert agent_ids(h) == ["p"]
        parent.send("again")
        await parent.wait_idle()
        links = subagent_links(parent.session)
        assert [link.session_id for link in links] == [
            f"{parent_id}.worker-1",
            f"{parent_id}.worker-2",
        ]
        assert [link.agent_id for link in links] == ["p.worker-1", "p.worker-2"]
        assert tool_results(parent.session)[-1].result.text.startswith("two")
        # The children's sessions are stored and loadable on their own.
        stored = await h.ctx.session_persistence.load(f"{parent_id}.worker-1")
        assert stored.header.meta["subagent"]["parent_session"] == parent_id
        first = await h.ctx.agents.resume(agent_id="first", resume_session_id=links[0].session_id)
        assert first.agent.session.derive_messages()[-1].text == "one"
        await first.aclose()
        await handle.aclose()
