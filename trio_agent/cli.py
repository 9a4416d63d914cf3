"""The ``trio-agent`` command.

::

    trio-agent run [-c FILE] [--agent ID] [--resume ID] [--json] PROMPT...
    trio-agent chat [-c FILE] [--agent ID] [--resume ID]
    trio-agent sessions list [-c FILE] [--json]
    trio-agent sessions show ID [-c FILE]
    trio-agent sessions export ID [-c FILE] [--format jsonl|markdown]

Without ``-c`` it reads ``./trio-agent.yml`` if there is one, else runs on the embedded defaults
(the offline model unless ``DEEPSEEK_API_KEY`` or ``OPENAI_API_KEY`` is set, the built-in tools
confined to the current directory, jsonl sessions under ``.trio-agent/sessions``).

Output: assistant text streams to stdout; tool activity, the session id and notes go to stderr.
Exit status: 0 when the (last) turn completed; 1 otherwise, with ``trio-agent: CODE: message`` on
stderr; 2 for usage and configuration errors.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import trio

from . import _serde
from .agent import Agent, AgentHandle
from .config import (
    ConfigError,
    HarnessConfig,
    default_config,
    load_config,
    mount_config,
    mount_persistence,
)
from .errors import TrioAgentError
from .llm import TextDelta, message_text
from .persistence import SessionPersistence, jsonl_lines
from .runtime import Context, open_runtime
from .session import (
    AssistantMessageEvent,
    ContextMessageEvent,
    PromptBlocked,
    Session,
    SessionEvent,
    SessionStore,
    SteeringMessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)

__all__ = ["main"]

_DEFAULT_CONFIG_FILE = "trio-agent.yml"


class _Exit(Exception):
    """Leave with ``status`` after printing ``trio-agent: code: message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-agent",
        description="An LLM agent harness on trio.",
        epilog="docs: docs/quickstart.md",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "-c",
            "--config",
            metavar="FILE",
            help="config file (default: ./trio-agent.yml if present)",
        )

    run = commands.add_parser("run", help="run one prompt to completion")
    common(run)
    run.add_argument("--agent", metavar="ID", help="agent id (a configured agent, or a new one)")
    run.add_argument("--resume", metavar="ID", help="continue the persisted session ID")
    run.add_argument(
        "--json", action="store_true", help="print one JSON result object instead of streaming"
    )
    run.add_argument("prompt", nargs="+", help="the prompt (words are joined with spaces)")

    chat = commands.add_parser("chat", help="interactive session (Ctrl-C cancels the running turn)")
    common(chat)
    chat.add_argument("--agent", metavar="ID", help="agent id")
    chat.add_argument("--resume", metavar="ID", help="continue the persisted session ID")

    sessions = commands.add_parser("sessions", help="list, show or export persisted sessions")
    actions = sessions.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="list persisted sessions")
    common(listing)
    listing.add_argument("--json", action="store_true", help="print JSON")
    show = actions.add_parser("show", help="print a session as a readable transcript")
    common(show)
    show.add_argument("id")
    export = actions.add_parser("export", help="export a session")
    common(export)
    export.add_argument("id")
    export.add_argument("--format", choices=("jsonl", "markdown"), default="jsonl")
    return parser


def _config(path: str | None) -> tuple[HarnessConfig, str | None]:
    if path is not None:
        return load_config(path), None
    if Path(_DEFAULT_CONFIG_FILE).is_file():
        return load_config(_DEFAULT_CONFIG_FILE), None
    return default_config()


# --- output -------------------------------------------------------------------------------------


class _Printer:
    """Streams assistant text to stdout and tool activity to stderr."""

    def __init__(self, out: TextIO, err: TextIO, *, stream: bool) -> None:
        self.out = out
        self.err = err
        self.stream = stream
        self.line_open = False

    def on_chunk(self, event: Any) -> None:
        if self.stream and isinstance(event.chunk, TextDelta):
            self.out.write(event.chunk.text)
            self.out.flush()
            self.line_open = not event.chunk.text.endswith("\n")

    def end_line(self) -> None:
        if self.line_open:
            self.out.write("\n")
            self.out.flush()
            self.line_open = False

    def on_session_event(self, event: Any) -> None:
        logged: SessionEvent = event.event
        if logged.type == ToolCallEvent.event_type:
            call = logged.payload_as(ToolCallEvent)
            self.end_line()
            self.note(f"→ {call.name} {_shorten(call.arguments, 120)}")
        elif logged.type == ToolResultEvent.event_type:
            result = logged.payload_as(ToolResultEvent).result
            status = f"error {result.code}" if result.is_error else "ok"
            self.note(f"← {status}: {_shorten(result.text, 120)}")

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _last_turn_end(session: Session, since: int) -> TurnEnd | None:
    for event in reversed(session.events[since:]):
        if event.type == TurnEnd.event_type:
            return event.payload_as(TurnEnd)
    return None


def _last_text(session: Session, since: int) -> str:
    for event in reversed(session.events[since:]):
        if event.type == AssistantMessageEvent.event_type:
            text = event.payload_as(AssistantMessageEvent).message.text
            if text.strip():
                return text
    return ""


def _failure_of(end: TurnEnd | None) -> tuple[str, str] | None:
    if end is None:
        return "NO_TURN", "the prompt did not start a turn"
    if end.reason == "completed":
        return None
    if end.reason == "error" and end.error is not None:
        return end.error.code, end.error.message
    messages = {
        "aborted": "the turn was cancelled",
        "disposed": "the agent was shut down during the turn",
        "max-tokens": "the model hit its output token limit before finishing",
        "rejected": "the prompt was blocked by a policy",
        "error": "a plugin failed during the turn (see the log above)",
        "interrupted": "the turn was interrupted",
    }
    return end.reason.upper().replace("-", "_"), messages.get(end.reason, end.reason)


# --- agents -------------------------------------------------------------------------------------


async def _open_agent(
    ctx: Context, config: HarnessConfig, agent_id: str | None, resume: str | None
) -> tuple[Agent, AgentHandle | None]:
    configured = {row.id for row in config.agents}
    if agent_id is not None and agent_id in configured:
        if resume is not None:
            raise _Exit(
                2,
                "USAGE",
                f"agent {agent_id!r} comes from the config; set its resume_session_id there instead of --resume",
            )
        with trio.fail_after(30):
            while (agent := ctx.agents.get(agent_id)) is None:
                await ctx.runtime.state_changed.wait()
        return agent, None
    agent_id = agent_id or "trio-agent"
    if resume is not None:
        handle: AgentHandle = await ctx.agents.resume(agent_id=agent_id, resume_session_id=resume)
    else:
        handle = await ctx.agents.create(
            agent_id=agent_id,
            session_id=f"{agent_id}-session-{uuid.uuid4()}",
            meta={"cwd": os.getcwd()},
        )
    return handle.agent, handle


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    config, note = _config(args.config)
    printer = _Printer(out, err, stream=not args.json)
    if note and not args.json:
        printer.note(f"trio-agent: {note}")
    async with open_runtime() as ctx:
        await mount_config(ctx, config)
        agent, handle = await _open_agent(ctx, config, args.agent, args.resume)
        agent.ctx.on("agent/stream-chunk", printer.on_chunk)
        if not args.json:
            agent.ctx.on("session/event", printer.on_session_event)
        printer.note(f"session: {agent.session.id}")
        since = len(agent.session.events)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_sigint, agent)
            agent.send(" ".join(args.prompt))
            await agent.wait_idle()
            nursery.cancel_scope.cancel()
        printer.end_line()
        end = _last_turn_end(agent.session, since)
        failure = _failure_of(end)
        if args.json:
            result: dict[str, Any] = {
                "session_id": agent.session.id,
                "turn": None if end is None else end.turn,
                "reason": None if end is None else end.reason,
                "text": _last_text(agent.session, since),
            }
            if failure is not None:
                result["error"] = {"code": failure[0], "message": failure[1]}
            out.write(json.dumps(result) + "\n")
        if handle is not None:
            await handle.aclose()
    if failure is not None:
        raise _Exit(1, *failure)
    return 0


async def _cancel_on_sigint(agent: Agent) -> None:
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            agent.cancel("interrupted (SIGINT)")


async def _chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    config, note = _config(args.config)
    printer = _Printer(out, err, stream=True)
    if note:
        printer.note(f"trio-agent: {note}")
    async with open_runtime() as ctx:
        await mount_config(ctx, config)
        agent, handle = await _open_agent(ctx, config, args.agent, args.resume)
        agent.ctx.on("agent/stream-chunk", printer.on_chunk)
        agent.ctx.on("session/event", printer.on_session_event)

        def on_turn_end(event: Any) -> None:
            printer.end_line()
            if event.reason != "completed":
                printer.note(f"[turn {event.turn} ended: {event.reason}]")

        agent.ctx.on("agent/turn-end", on_turn_end)
        printer.note(
            f"session: {agent.session.id}  (type /exit to quit; Ctrl-C cancels a running turn)"
        )
        async with trio.open_nursery() as nursery:

            async def signals() -> None:
                with trio.open_signal_receiver(signal.SIGINT) as received:
                    async for _ in received:
                        if agent.status == "running":
                            printer.end_line()
                            printer.note("^C: cancelling the turn")
                            agent.cancel("interrupted (SIGINT)")
                        else:
                            nursery.cancel_scope.cancel()

            nursery.start_soon(signals)
            stdin = trio.wrap_file(sys.stdin)
            while True:
                line = await stdin.readline()
                if not line:
                    break
                text = line.strip()
                if text in ("/exit", "/quit"):
                    break
                if not text:
                    continue
                if agent.status == "running":
                    agent.steer(text)
                    printer.note("(steering the running turn)")
                else:
                    agent.send(text)
            await agent.wait_idle()
            nursery.cancel_scope.cancel()
        if handle is not None:
            await handle.aclose()
    return 0


# --- sessions -----------------------------------------------------------------------------------


async def _sessions(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    config, _ = _config(args.config)
    if config.persistence.type in ("none", "memory"):
        raise _Exit(
            2,
            "CONFIG",
            f"persistence type {config.persistence.type!r} keeps no sessions to {args.action}",
        )
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        await mount_persistence(ctx, config.persistence)
        store: SessionPersistence = ctx.session_persistence
        if args.action == "list":
            infos = await store.list()
            if args.json:
                out.write(json.dumps([_serde.unstructure(i) for i in infos]) + "\n")
            elif not infos:
                err.write("no sessions\n")
            else:
                for info in infos:
                    title = info.title or ""
                    out.write(
                        f"{info.session_id}\t{info.turns} turn(s)\t{_when(info.updated_at)}\t{_shorten(title, 60)}\n"
                    )
            return 0
        stored = await store.load(args.id)
        if args.action == "show" or args.format == "markdown":
            out.write(_transcript(stored.header.session_id, stored.events))
        else:
            out.writelines(jsonl_lines(stored.header, stored.events))
    return 0


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


_MESSAGE_LABELS = {
    UserMessageEvent: "User",
    SteeringMessageEvent: "User (steering)",
    ContextMessageEvent: "Context",
}


def _transcript(session_id: str, events: Sequence[SessionEvent]) -> str:
    lines = [f"# Session {session_id}", ""]
    for event in events:
        payload = event.payload
        if isinstance(payload, TurnStart):
            lines += [f"## Turn {payload.turn}", ""]
        elif isinstance(payload, UserMessageEvent | SteeringMessageEvent | ContextMessageEvent):
            label = _MESSAGE_LABELS[type(payload)]
            lines += [f"**{label}:** {message_text(payload.message.content)}", ""]
        elif isinstance(payload, PromptBlocked):
            lines += [f"**Blocked:** {payload.reason}", ""]
        elif isinstance(payload, AssistantMessageEvent) and payload.message.text.strip():
            suffix = " *(interrupted)*" if payload.interrupted else ""
            lines += [f"**Assistant:** {payload.message.text}{suffix}", ""]
        elif isinstance(payload, ToolCallEvent):
            lines += [f"- tool `{payload.name}` `{payload.arguments}`"]
        elif isinstance(payload, ToolResultEvent):
            result = payload.result
            status = f"error {result.code}" if result.is_error else "ok"
            lines += [f"  - {status}: {_shorten(result.text, 200)}", ""]
        elif isinstance(payload, TurnEnd):
            lines += [f"*turn {payload.turn} ended: {payload.reason}*", ""]
    return "\n".join(lines) + "\n"


# --- entry point --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``trio-agent`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    out, err = sys.stdout, sys.stderr
    commands = {"run": _run, "chat": _chat, "sessions": _sessions}
    try:
        return trio.run(commands[args.command], args, out, err)
    except _Exit as exc:
        err.write(f"trio-agent: {exc.code}: {exc.message}\n")
        return exc.status
    except ConfigError as exc:
        err.write(f"trio-agent: CONFIG: {exc}\n")
        return 2
    except TrioAgentError as exc:
        err.write(f"trio-agent: {type(exc).__name__}: {exc}\n")
        return 1
    except KeyboardInterrupt:
        err.write("trio-agent: INTERRUPTED: stopped by Ctrl-C\n")
        return 130
    except BrokenPipeError:
        # The reader went away (``trio-agent sessions export X | head``): not an error.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter shutdown quiet
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
