"""``trio-agent run``: one prompt to completion."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any, TextIO

import trio

from ..agent import Agent, AgentFailed
from ..config import mount_config
from ..persistence import PersistenceError
from ..runtime import open_runtime
from ..session import AssistantMessageEvent, Session
from ..tools import APPROVAL
from ..usage import tally
from ._agents import STOP_SIGNALS, check_id_args, load_cli_config, open_agent, report_servers_down
from ._approval import RunApprovals, allow_names
from ._errors import CliExit
from ._output import Printer, failure_of, last_text, last_turn_end, text_mode


def read_prompt(args: argparse.Namespace) -> str:
    """The prompt: the words, or piped stdin for ``-`` / no words; an empty one is refused."""
    words: list[str] = args.prompt
    if words == ["-"] or not words:
        if not words and sys.stdin.isatty():
            raise CliExit(2, "USAGE", "no prompt: give it as arguments, '-' or on piped stdin")
        text = sys.stdin.read()
    else:
        text = " ".join(words)
    if not text.strip():
        raise CliExit(2, "USAGE", "the prompt is empty")
    return text.strip("\n") if "\n" not in text.strip("\n") else text.strip()


class _PersistenceWatch:
    """Remembers the first persistence failure an agent reports (``agent/error``): a session
    that could not be written makes ``run`` fail with ``PERSISTENCE``."""

    def __init__(self) -> None:
        self.error: PersistenceError | None = None

    def on_error(self, event: AgentFailed) -> None:
        if self.error is None and isinstance(event.error, PersistenceError):
            self.error = event.error


async def run_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``trio-agent run``: send one prompt, wait for the turn, and map its end to the exit
    status."""
    check_id_args(args)
    prompt = read_prompt(args)
    started = time.monotonic()
    config, note = load_cli_config(args.config)
    printer = Printer(
        out,
        err,
        text=text_mode(out, json_output=args.json),
        max_attempts=config.llm.retry.max_attempts if config.llm.retry else None,
    )
    if note and not args.json:
        printer.note(f"trio-agent: {note}")
    received: list[int] = []
    persistence = _PersistenceWatch()
    async with open_runtime() as ctx:
        report_servers_down(await mount_config(ctx, config, approval_mode="cli"), err)
        approvals = RunApprovals(err, allow_all=args.yes, allow=allow_names(args.allow))
        ctx.provide(APPROVAL.name, approvals)
        agent, handle = await open_agent(ctx, config, args)
        agent.ctx.on("agent/stream-chunk", printer.on_chunk)
        agent.ctx.on("agent/error", persistence.on_error)
        agent.ctx.on("session/event", printer.on_session_event)
        agent.ctx.on("agent/subagent", printer.on_subagent)
        async with trio.open_nursery() as nursery:
            await nursery.start(_cancel_on_signals, agent, received)
            printer.note(f"session: {agent.session.id}")
            since = len(agent.session.events)
            agent.send(prompt)
            await agent.wait_idle()
            nursery.cancel_scope.cancel()
        printer.end_line()
        end = last_turn_end(agent.session, since)
        if args.verbose:
            printer.note(_closing_line(agent.session, since, time.monotonic() - started))
        failure = failure_of(end)
        if args.json:
            result: dict[str, Any] = {
                "session_id": agent.session.id,
                "turn": None if end is None else end.turn,
                "reason": None if end is None else end.reason,
                "text": last_text(agent.session, since),
            }
            if failure is not None:
                result["error"] = {"code": failure[0], "message": failure[1]}
            if printer.children:
                result["subagents"] = printer.children
            out.write(json.dumps(result) + "\n")
        if handle is not None:
            await handle.aclose()
    if received:
        name = signal.Signals(received[0]).name
        if failure is None:
            err.write(f"trio-agent: stopped by {name}\n")
        else:
            err.write(f"trio-agent: {failure[0]}: {failure[1]} ({name})\n")
        return 128 + received[0]
    if persistence.error is not None:
        raise CliExit(1, "PERSISTENCE", str(persistence.error))
    if failure is not None:
        raise CliExit(1, *failure)
    return 0


def _closing_line(session: Session, since: int, wall: float) -> str:
    """``-v``: steps, tokens in/out/cached and wall time of the turn that just ran."""
    steps = sum(1 for e in session.events[since:] if e.type == AssistantMessageEvent.event_type)
    totals = tally(session.events[since:]).session
    return (
        f"done: {steps} step(s), tokens in {totals.prompt_tokens} / out {totals.output_tokens} "
        f"/ cached {totals.cached_tokens}, {wall:.1f} s"
    )


async def _cancel_on_signals(
    agent: Agent,
    received: list[int],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Ctrl-C, SIGTERM and SIGHUP cancel the running turn (which ends ``aborted`` and is
    flushed); ``received`` collects them, in order, for the exit status."""
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            received.append(signum)
            agent.cancel(f"interrupted ({signal.Signals(signum).name})")
