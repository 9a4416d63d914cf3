"""Property: the body runs iff every policy stage allowed the call, and the code says why."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st
from tools_helpers import invocation, make_agent

from trio_agent.runtime import Context, open_runtime
from trio_agent.tools import (
    DENIED,
    Allow,
    ApprovalRequest,
    Approved,
    Ask,
    Denied,
    Deny,
    ToolExecution,
    ToolRegistry,
    tool,
)

Next = Callable[[], Awaitable[Any]]

decisions = st.one_of(
    st.just(Allow()),
    st.builds(Deny, st.sampled_from(["policy says no", "too risky"])),
    st.builds(Ask, st.none() | st.just("writes files")),
)
#: A listener that delegates (None) or answers a decision itself.
listeners = st.lists(st.none() | decisions, max_size=3)
#: Guard verdicts, each for the global layer (False) or the agent's (True).
guards = st.lists(st.tuples(st.booleans(), st.none() | st.sampled_from(["g1", "g2"])), max_size=4)
#: No approval service, or one that answers True / False.
approvals = st.none() | st.booleans()


@attrs.define
class Approval:
    answer: bool

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        return Approved() if self.answer else Denied()


def expected_outcome(
    answers: list[Any], guard_list: list[tuple[bool, str | None]], approval: bool | None
) -> str | None:
    """The deny reason the pipeline must produce, or None when the body must run."""
    decision = next((a for a in answers if a is not None), Allow())
    if isinstance(decision, Deny):
        return decision.reason
    if isinstance(decision, Ask):
        what = 'tool "probe" requires approval' + (
            f" ({decision.reason})" if decision.reason else ""
        )
        if approval is None:
            return f"{what}, but no approval service is mounted"
        if not approval:
            return f"{what} and was not approved"
    ordered = [v for scoped, v in guard_list if not scoped] + [
        v for scoped, v in guard_list if scoped
    ]
    return next((v for v in ordered if v is not None), None)


@given(answers=listeners, guard_list=guards, approval=approvals, scoped_listeners=st.booleans())
async def test_body_runs_iff_every_stage_allowed(
    answers: list[Any],
    guard_list: list[tuple[bool, str | None]],
    approval: bool | None,
    scoped_listeners: bool,
) -> None:
    ran: list[str] = []

    @tool
    async def probe() -> str:
        ran.append("body")
        return "ran"

    async with open_runtime() as root:
        await root.plugin(ToolRegistry)
        tools: ToolRegistry = root.tools
        if approval is not None:
            root.provide("approval", Approval(approval))
        agent = make_agent(root, "A")
        tools.register(probe)
        listen_on: Context = agent.ctx if scoped_listeners else root
        for answer in answers:

            async def listener(execution: ToolExecution, next: Next, answer: Any = answer) -> Any:
                return answer if answer is not None else await next()

            listen_on.on("tools/pre-execute", listener)
        for scoped, verdict in guard_list:
            (agent.ctx if scoped else root).tools.guard(lambda execution, v=verdict: v)

        result = await tools.execute(invocation("probe", agent=agent))

    reason = expected_outcome(answers, guard_list, approval)
    if reason is None:
        assert ran == ["body"]
        assert (result.is_error, result.code, result.text) == (False, None, "ran")
    else:
        assert ran == []
        assert (result.is_error, result.code) == (True, DENIED)
        assert result.text.startswith(f"Error: {reason}")
