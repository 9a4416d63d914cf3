"""``trio-agent sessions``: list, show, export and remove persisted sessions."""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import trio

from .. import _serde
from ..config import mount_persistence
from ..llm import message_text
from ..persistence import SESSION_PERSISTENCE, jsonl_lines
from ..runtime import open_runtime
from ..session import (
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    AssistantMessageEvent,
    ContextMessageEvent,
    PromptBlocked,
    SessionEvent,
    SessionStore,
    SteeringMessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from ..usage import tally
from ._agents import load_cli_config, session_id_arg
from ._errors import CliExit
from ._output import shorten


async def sessions_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``trio-agent sessions list|show|export|rm``."""
    # Reading sessions needs only the persistence section: a broken plugin must not stop it.
    config, _ = load_cli_config(args.config, import_plugins=False)
    if config.persistence.type in ("none", "memory"):
        raise CliExit(
            2,
            "CONFIG",
            f"persistence type {config.persistence.type!r} keeps no sessions to {args.action}",
        )
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        await mount_persistence(ctx, config.persistence)
        store = ctx.require(SESSION_PERSISTENCE)
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
                        f"{info.session_id}\t{info.turns} turn(s)\t{_when(info.updated_at)}\t{shorten(title, 60)}\n"
                    )
            return 0
        session_id = session_id_arg(args.id)
        if not await store.exists(session_id):
            raise CliExit(
                2,
                "SESSION_NOT_FOUND",
                f"no stored session {session_id!r}",
                hint="trio-agent sessions list",
            )
        if args.action == "rm":
            await store.acquire(session_id)  # SessionBusyError while another process has it
            try:
                await _remove(store, session_id)
            finally:
                await store.release(session_id)
            err.write(f"removed {session_id}\n")
            return 0
        stored = await store.load(session_id)
        fmt = "markdown" if args.action == "show" else args.format
        if fmt in ("markdown", "md"):
            out.write(_transcript(stored.header.session_id, stored.events))
            if args.action == "show":
                out.write(_usage_summary(stored.events))
        elif fmt == "json":
            lines = [json.loads(line) for line in jsonl_lines(stored.header, stored.events)]
            out.write(json.dumps({"header": lines[0], "events": lines[1:]}) + "\n")
        else:
            out.writelines(jsonl_lines(stored.header, stored.events))
    return 0


async def _remove(store: Any, session_id: str) -> None:
    """Delete a stored session: the backend's ``delete`` if it has one, else its log file."""
    delete = getattr(store, "delete", None)
    if delete is not None:
        await delete(session_id)
        return
    directory = getattr(store, "directory", None)  # JsonlPersistence: one file per session
    if not isinstance(directory, str):
        raise CliExit(2, "USAGE", "this persistence backend cannot remove sessions")
    path = Path(directory) / f"{session_id}.jsonl"
    await trio.to_thread.run_sync(path.unlink)


def _usage_summary(events: Sequence[SessionEvent]) -> str:
    totals = tally(events).session
    return (
        f"*usage: {totals.requests} model call(s), tokens in {totals.prompt_tokens} / out "
        f"{totals.output_tokens} / cached {totals.cached_tokens}*\n"
    )


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
        elif isinstance(payload, ApprovalRequestEvent):
            why = f": {shorten(payload.reason, 200)}" if payload.reason else ""
            lines += [f"  - approval asked for `{payload.tool}`{why}"]
        elif isinstance(payload, ApprovalDecisionEvent):
            if payload.decision == "approved":
                scope = "for the session" if payload.remember == "session" else "once"
                lines += [f"  - approved {scope} by {payload.by}"]
            else:
                why = f": {shorten(payload.reason, 200)}" if payload.reason else ""
                lines += [f"  - denied by {payload.by}{why}"]
        elif isinstance(payload, ToolResultEvent):
            result = payload.result
            status = f"error {result.code}" if result.is_error else "ok"
            lines += [f"  - {status}: {shorten(result.text, 200)}", ""]
        elif isinstance(payload, TurnEnd):
            lines += [f"*turn {payload.turn} ended: {payload.reason}*", ""]
    return "\n".join(lines) + "\n"
