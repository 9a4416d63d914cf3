"""``trio-agent sessions``: list, show, export and remove persisted sessions."""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs
import trio

from .. import _serde
from ..config import mount_persistence, mount_redactor
from ..ids import validate_session_id
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
from ._output import escape_controls, shorten

if TYPE_CHECKING:
    from ..subagents import SubagentLink


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
        await mount_redactor(ctx, config)
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
            links = await _child_links(store, stored.events)
            out.write(_transcript(stored.header.session_id, stored.events, links))
            if args.action == "show":
                out.write(_usage_summary(stored.events))
        elif fmt == "json":
            lines = [json.loads(line) for line in jsonl_lines(stored.header, stored.events)]
            document: dict[str, Any] = {"header": lines[0], "events": lines[1:]}
            children = _links_of(stored.events)
            if children:
                document["subagents"] = [_serde.unstructure(link) for link in children]
            out.write(json.dumps(document) + "\n")
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


def _links_of(events: Sequence[SessionEvent]) -> tuple[SubagentLink, ...]:
    """The children a parent's log started (its ``subagent/start`` records)."""
    from ..subagents import subagent_links  # the CLI imports the sub-agent package on demand

    return subagent_links(events)


@attrs.frozen
class _ChildLink:
    """One child a transcript links to: its session id, whether that session is stored."""

    call_id: str | None
    session_id: str
    stored: bool


async def _child_links(store: Any, events: Sequence[SessionEvent]) -> dict[int, _ChildLink]:
    """The children the log started, by the index of their ``subagent/start`` record; a record
    that names no possible session (a hand-edited log) links nothing."""
    links = {}
    for index, event in enumerate(events):
        for link in _links_of([event]):
            try:
                child = validate_session_id(link.session_id)
            except (TypeError, ValueError):
                continue
            call_id = link.call_id if isinstance(link.call_id, str) else None
            links[index] = _ChildLink(call_id, child, await store.exists(child))
    return links


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


def _link_line(link: _ChildLink) -> str:
    if link.stored:
        return f"  - ↳ child session {link.session_id} (trio-agent sessions show {link.session_id})"
    return f"  - ↳ child session {link.session_id} (not stored)"


def _transcript(
    session_id: str, events: Sequence[SessionEvent], links: Mapping[int, _ChildLink]
) -> str:
    """The Markdown transcript of a log. Everything stored in it (the model's and the user's
    text, tool arguments, reasons) is shown with terminal control characters escaped
    (:func:`escape_controls`): a hostile log cannot drive the terminal it is shown on."""

    def block(text: str) -> str:
        return escape_controls(text, multiline=True)

    def line(text: object) -> str:
        return escape_controls(str(text))

    # A child is linked under the result of the call that started it, else where it started.
    results = {e.payload.call_id for e in events if isinstance(e.payload, ToolResultEvent)}
    under: dict[str, list[_ChildLink]] = {}
    for link in links.values():
        if link.call_id in results:
            under.setdefault(link.call_id, []).append(link)
    lines = [f"# Session {session_id}", ""]
    for index, event in enumerate(events):
        payload = event.payload
        if isinstance(payload, TurnStart):
            lines += [f"## Turn {payload.turn}", ""]
        elif isinstance(payload, UserMessageEvent | SteeringMessageEvent | ContextMessageEvent):
            label = _MESSAGE_LABELS[type(payload)]
            lines += [f"**{label}:** {block(message_text(payload.message.content))}", ""]
        elif isinstance(payload, PromptBlocked):
            lines += [f"**Blocked:** {block(payload.reason)}", ""]
        elif isinstance(payload, AssistantMessageEvent) and payload.message.text.strip():
            suffix = " *(interrupted)*" if payload.interrupted else ""
            lines += [f"**Assistant:** {block(payload.message.text)}{suffix}", ""]
        elif isinstance(payload, ToolCallEvent):
            lines += [f"- tool `{line(payload.name)}` `{line(payload.arguments)}`"]
        elif isinstance(payload, ApprovalRequestEvent):
            why = f": {shorten(payload.reason, 200)}" if payload.reason else ""
            lines += [f"  - approval asked for `{line(payload.tool)}`{why}"]
        elif isinstance(payload, ApprovalDecisionEvent):
            if payload.decision == "approved":
                scope = "for the session" if payload.remember == "session" else "once"
                lines += [f"  - approved {scope} by {line(payload.by)}"]
            else:
                why = f": {shorten(payload.reason, 200)}" if payload.reason else ""
                lines += [f"  - denied by {line(payload.by)}{why}"]
        elif isinstance(payload, ToolResultEvent):
            result = payload.result
            status = f"error {line(result.code)}" if result.is_error else "ok"
            lines += [f"  - {status}: {shorten(result.text, 200)}"]
            lines += [_link_line(link) for link in under.pop(payload.call_id, ())]
            lines += [""]
        elif isinstance(payload, TurnEnd):
            lines += [f"*turn {payload.turn} ended: {line(payload.reason)}*", ""]
        elif index in links and links[index].call_id not in results:
            lines += [_link_line(links[index])]
    return "\n".join(lines) + "\n"
