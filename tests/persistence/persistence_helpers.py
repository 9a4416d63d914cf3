"""Shared helpers for the persistence tests: backends, a small runtime, core events."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs

from trio_agent.ids import CallId, MessageId, SessionId
from trio_agent.llm import (
    LlmCallConfig,
    LlmFailure,
    Message,
    ReasoningBlock,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolResult,
    ToolSchema,
    Usage,
)
from trio_agent.persistence import (
    JsonlPersistence,
    MemoryPersistence,
    MemoryStorage,
    SqlitePersistence,
)
from trio_agent.runtime import Context, Plugin, open_runtime
from trio_agent.session import (
    AssistantChunk,
    AssistantMessageEvent,
    ContextMessageEvent,
    LlmRetry,
    PromptBlocked,
    RequestHeader,
    Session,
    SessionStore,
    SteeringMessageEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)


@attrs.frozen
class BackendKind:
    """One backend under test: its plugin and a config pointing into a test directory."""

    name: str
    plugin: Plugin
    make_config: Callable[[Path], Any]

    def config(self, root: Path) -> Any:
        return self.make_config(root)


def _jsonl(root: Path) -> Any:
    return JsonlPersistence.Config(path=str(root / "sessions"))


def _sqlite(root: Path) -> Any:
    return SqlitePersistence.Config(path=str(root / "db" / "sessions.sqlite3"))


_MEMORY: dict[Path, MemoryStorage] = {}


def _memory(root: Path) -> Any:
    # One storage per test directory, so a second runtime in the same test sees the first's logs.
    return MemoryPersistence.Config(storage=_MEMORY.setdefault(root, MemoryStorage()))


BACKENDS = (
    BackendKind("jsonl", JsonlPersistence, _jsonl),
    BackendKind("sqlite", SqlitePersistence, _sqlite),
    BackendKind("memory", MemoryPersistence, _memory),
)


@contextlib.asynccontextmanager
async def open_store(kind: BackendKind, root: Path) -> AsyncIterator[Context]:
    """A runtime with ``ctx.sessions`` and ``ctx.session_persistence`` (``kind``, in ``root``)."""
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        await ctx.plugin(kind.plugin, kind.config(root))
        yield ctx


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with its size and mtime (to prove nothing moved)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            stat = os.stat(path)
            out[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
    return out


def msg(text: str, *, role: Any = "user", source: Any = "user", id: str | None = None) -> Message:
    return Message(MessageId(id or f"m-{text[:20]}"), role, (TextBlock(text),), source)


def write_turn(session: Session, *, prompt: str = "hello", close: bool = True) -> None:
    """Append one loop-shaped turn with a tool call (left open when ``close`` is false)."""
    turn = session.last_turn + 1
    call = CallId(f"call-{turn}")
    session.append(TurnStart.event_type, TurnStart(turn=turn))
    session.append(
        UserMessageEvent.event_type, UserMessageEvent(turn=turn, message=msg(prompt, id=f"u{turn}"))
    )
    session.append(StepStart.event_type, StepStart(turn=turn, step=1))
    answer = Message.assistant(
        TextBlock("Let me add."),
        ToolCallBlock(call, "add", '{"a": 1, "b": 2}'),
        id=MessageId(f"a{turn}"),
    )
    session.append(
        AssistantMessageEvent.event_type,
        AssistantMessageEvent(turn=turn, step=1, message=answer, finish="tool-calls"),
    )
    session.append(
        ToolCallEvent.event_type,
        ToolCallEvent(turn=turn, step=1, call_id=call, name="add", arguments='{"a": 1, "b": 2}'),
    )
    if not close:
        return
    session.append(
        ToolResultEvent.event_type,
        ToolResultEvent(
            turn=turn, step=1, call_id=call, result=ToolResult(call, (TextBlock("3"),))
        ),
    )
    session.append(StepEnd.event_type, StepEnd(turn=turn, step=1))
    session.append(TurnEnd.event_type, TurnEnd(turn=turn, reason="completed"))


def every_core_event(session: Session) -> None:
    """Append one event of every core type (and a plugin type with awkward JSON)."""
    call = CallId("call-1")
    session.append(TurnStart.event_type, TurnStart(turn=1))
    session.append(
        UserMessageEvent.event_type,
        UserMessageEvent(turn=1, message=msg("Add 1 and 2\nplease", id="u1")),
    )
    session.append(
        PromptBlocked.event_type,
        PromptBlocked(turn=1, message=msg("rm -rf /", id="u2"), reason="policy"),
    )
    session.append(StepStart.event_type, StepStart(turn=1, step=1))
    session.append(
        RequestHeader.event_type,
        RequestHeader(
            turn=1,
            step=1,
            config=LlmCallConfig("scripted", "m", max_tokens=100, temperature=0.5, stop=("x",)),
            system="You are terse.",
            tools=(ToolSchema("add", "Add.", {"type": "object", "properties": {}}),),
            prefix=(msg("prefix", id="p1"),),
        ),
    )
    session.append(
        AssistantChunk.event_type, AssistantChunk(turn=1, step=1, chunk=TextDelta(0, "Let"))
    )
    session.append(
        AssistantMessageEvent.event_type,
        AssistantMessageEvent(
            turn=1,
            step=1,
            message=Message.assistant(
                ReasoningBlock("think"),
                TextBlock("Let me add."),
                ToolCallBlock(call, "add", '{"a": 1, "b": 2}'),
                id=MessageId("a1"),
            ),
            finish="tool-calls",
            usage=Usage(10, 5, cache_read_tokens=2),
        ),
    )
    session.append(
        ToolCallEvent.event_type,
        ToolCallEvent(turn=1, step=1, call_id=call, name="add", arguments='{"a": 1, "b": 2}'),
    )
    session.append(
        ToolResultEvent.event_type,
        ToolResultEvent(
            turn=1,
            step=1,
            call_id=call,
            result=ToolResult(call, (TextBlock("3"),), code=None),
        ),
    )
    session.append(
        ContextMessageEvent.event_type,
        ContextMessageEvent(turn=1, step=1, message=msg("ctx", source="context", id="c1")),
    )
    session.append(
        SteeringMessageEvent.event_type,
        SteeringMessageEvent(turn=1, step=1, message=msg("steer", source="steering", id="s1")),
    )
    session.append(
        LlmRetry.event_type,
        LlmRetry(
            turn=1,
            step=1,
            attempt=1,
            delay=0.25,
            failure=LlmFailure("RATE_LIMIT", "slow down", status=429, retry_after=1.5),
        ),
    )
    session.append(StepEnd.event_type, StepEnd(turn=1, step=1))
    session.append(TurnEnd.event_type, TurnEnd(turn=1, reason="completed"))
    session.append(
        "plugin/custom",
        {
            "unicode": 'héllo ☃ 𝄞 \u2028 \n "quoted" \\',
            "big": 2**70,
            "neg": -0.0,
            "float": 1e-300,
            "nested": [[], {}, [None, True, False]],
        },
    )


def sid(value: str) -> SessionId:
    return SessionId(value)
