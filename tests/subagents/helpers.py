"""Shared helpers of the sub-agent tests: a model routed by session, a harness, log checks."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs
import trio

from trio_agent.llm import GenerateRequest
from trio_agent.session import Session, ToolResultEvent, TurnEnd
from trio_agent.subagents import SubagentDefinition, SubagentNotice, SubagentService
from trio_agent.testing import ScriptedResponse, ScriptItem, TestHarness, open_test_harness
from trio_agent.tools import Tool, tool


@tool(concurrency_safe=True)
async def slow(seconds: float) -> str:
    """Take a while.

    Args:
        seconds: How long.
    """
    await trio.sleep(seconds)
    return "slow result"


@tool(concurrency_safe=True)
async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


#: Each model key's script (``""`` the top agent, ``"worker-1"`` a child): what a test passes
#: to :func:`open_subagents`.
Scripts: TypeAlias = dict[str, Sequence[ScriptItem]]

WORKER = SubagentDefinition("worker", "Does a piece of work.", "Work carefully and answer briefly.")


def route(session_id: str) -> str:
    """The routing key of a session: ``""`` for a top-level session, else the child path after
    the top-level session id (``"worker-1"``, ``"worker-1.helper-1"``)."""
    return session_id.split(".", 1)[1] if "." in session_id else ""


@attrs.define
class Router:
    """A model answering each session from its own script (parallel children interleave
    their requests, so one shared queue would be scheduling-dependent)."""

    scripts: dict[str, collections.deque[ScriptItem]] = attrs.field(factory=dict)
    requests: dict[str, list[GenerateRequest]] = attrs.field(
        factory=lambda: collections.defaultdict(list)
    )

    def add(self, key: str, *items: ScriptItem) -> None:
        self.scripts.setdefault(key, collections.deque()).extend(items)

    def __call__(self, request: GenerateRequest) -> ScriptedResponse | str:
        key = route(request.session_id or "")
        self.requests[key].append(request)
        queue = self.scripts.get(key)
        if not queue:
            raise LookupError(f"no scripted response left for session {request.session_id!r}")
        item = queue.popleft()
        if callable(item) and not isinstance(item, ScriptedResponse):
            return item(request)
        return item


@contextlib.asynccontextmanager
async def open_subagents(
    scripts: Mapping[str, Sequence[ScriptItem]] | None = None,
    *,
    definitions: Iterable[SubagentDefinition] = (WORKER,),
    tools: Sequence[Tool] = (),
    delay: float = 0.0,
    **config: Any,
) -> AsyncIterator[tuple[TestHarness, SubagentService, Router]]:
    """A harness with the sub-agent service mounted, on a :class:`Router` model."""
    router = Router()
    for key, items in (scripts or {}).items():
        router.add(key, *items)
    harness_options = {
        k: config.pop(k)
        for k in (
            "persistence",
            "persistence_config",
            "teardown_timeout",
            "max_parallel_tool_calls",
        )
        if k in config
    }
    async with open_test_harness([router] * 10_000, tools=tools, **harness_options) as h:
        h.model.delay = delay
        fiber = await h.ctx.plugin(
            SubagentService, SubagentService.Config(definitions=tuple(definitions), **config)
        )
        yield h, fiber.instance, router


def notices(agent_or_ctx: Any, into: list[SubagentNotice]) -> None:
    """Record every ``agent/subagent`` notice heard through ``agent_or_ctx``."""
    ctx = getattr(agent_or_ctx, "ctx", agent_or_ctx)
    ctx.on("agent/subagent", into.append)


def tool_results(session: Session) -> list[ToolResultEvent]:
    return [e.payload_as(ToolResultEvent) for e in session.events if e.type == "tool/result"]


def turn_ends(session: Session) -> list[str]:
    return [e.payload_as(TurnEnd).reason for e in session.events if e.type == "turn/end"]


def assert_balanced(session: Session) -> None:
    """Every turn and step closed; every ``tool/call`` answered by exactly one ``tool/result``
    inside its step; no turn left open."""
    open_turn: int | None = None
    open_step: int | None = None
    pending: list[str] = []
    for event in session.events[session.header.seed_length or 0 :]:
        kind, data = event.type, event.data
        if kind == "turn/start":
            assert open_turn is None, f"{session.id}: turn {data['turn']} inside an open turn"
            open_turn = data["turn"]
        elif kind == "turn/end":
            assert open_turn == data["turn"] and open_step is None, f"{session.id}: {event}"
            open_turn = None
        elif kind == "step/start":
            assert open_turn is not None and open_step is None, f"{session.id}: {event}"
            open_step = data["step"]
        elif kind == "step/end":
            assert open_step == data["step"], f"{session.id}: {event}"
            assert not pending, f"{session.id}: step closed with unanswered calls {pending}"
            open_step = None
        elif kind == "tool/call":
            assert open_step is not None
            pending.append(data["call_id"])
        elif kind == "tool/result":
            assert data["call_id"] in pending, f"{session.id}: unmatched result {event}"
            pending.remove(data["call_id"])
    assert open_turn is None, f"{session.id}: turn {open_turn} never closed"


def agent_ids(h: TestHarness) -> list[str]:
    return [a.id for a in h.ctx.agents.list()]


def record_sessions(h: TestHarness) -> list[Session]:
    """Every session created from now on (children's sessions are detached when they close,
    so the store no longer lists them)."""
    created: list[Session] = []
    h.ctx.on("session/created", lambda payload: created.append(payload.session))
    return created
