"""``trio-agent chat``: the interactive session."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TextIO

import trio

from ..agent import TurnEnded
from ..config import mount_config
from ..runtime import open_runtime
from ..tools import APPROVAL
from ._agents import STOP_SIGNALS, check_id_args, load_cli_config, open_agent, report_servers_down
from ._approval import ChatApprovals
from ._output import Printer, failure_of, last_turn_end


async def chat_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``trio-agent chat``: read lines, send or steer them, until ``/exit``, Ctrl-D or a stop
    signal."""
    check_id_args(args)
    config, note = load_cli_config(args.config)
    printer = Printer(
        out,
        err,
        text="live",  # chat streams even to a pipe: it is read as it happens
        max_attempts=config.llm.retry.max_attempts if config.llm.retry else None,
    )
    if note:
        printer.note(f"trio-agent: {note}")
    async with open_runtime() as ctx:
        report_servers_down(await mount_config(ctx, config, approval_mode="cli"), err)
        approvals = ChatApprovals(out, printer.end_line)
        ctx.provide(APPROVAL.name, approvals)
        agent, handle = await open_agent(ctx, config, args)
        agent.ctx.on("agent/stream-chunk", printer.on_chunk)
        agent.ctx.on("session/event", printer.on_session_event)
        agent.ctx.on("agent/subagent", printer.on_subagent)

        #: A turn was sent and has not ended (``agent.status`` turns idle only after the
        #: ``agent/turn-end`` listeners ran, when the prompt is already on the screen).
        busy = False

        def on_turn_end(event: TurnEnded) -> None:
            printer.end_line()
            nonlocal busy
            busy = False
            failure = failure_of(last_turn_end(agent.session, 0))
            if failure is not None:
                printer.note(f"{failure[0]}: {failure[1]}")
            prompt()

        interactive = sys.stdin.isatty()

        def prompt() -> None:
            """The idle prompt (a terminal only): ``> `` says the agent waits for a line."""
            if interactive:
                out.write(_IDLE_PROMPT)
                out.flush()

        agent.ctx.on("agent/turn-end", on_turn_end)
        terminated: list[int] = []
        async with trio.open_nursery() as nursery:

            async def signals(*, task_status: trio.TaskStatus[None]) -> None:
                with trio.open_signal_receiver(*STOP_SIGNALS) as received:
                    task_status.started()
                    async for signum in received:
                        if signum != signal.SIGINT:
                            # SIGTERM / SIGHUP: end the running turn (aborted, flushed), quit.
                            terminated.append(signum)
                            agent.cancel(f"interrupted ({signal.Signals(signum).name})")
                            await agent.wait_idle()
                            nursery.cancel_scope.cancel()
                        elif busy:
                            printer.end_line()
                            printer.note("^C: cancelling the turn")
                            agent.cancel("interrupted (SIGINT)")
                        else:
                            nursery.cancel_scope.cancel()

            await nursery.start(signals)
            printer.note(
                f"session: {agent.session.id}  (type /help for commands, /exit to quit; "
                "Ctrl-C cancels a running turn)"
            )
            reader = _LineReader(sys.stdin.fileno())
            if not interactive:  # the loop waits out each turn: the question reads itself
                approvals.read = reader.readline
            prompt()
            while True:
                # A thread the signals can abandon: a blocked read must not hold up the exit.
                line = await reader.readline()
                if line and approvals.answer(line):
                    continue  # the answer to a pending approval question
                if not line:
                    break
                text = line.strip()
                if text in ("/exit", "/quit"):
                    break
                if not text:
                    continue
                if text in ("/help", "/?"):
                    printer.note(_CHAT_HELP)
                    if not busy:
                        prompt()
                    continue
                if text == "/cancel":
                    agent.cancel("cancelled (/cancel)")
                    continue
                if text.startswith("/") and not text.startswith("//"):
                    printer.note(f"unknown command {text.split()[0]!r}; /help lists them")
                    continue
                if text.startswith("//"):
                    text = text[1:]
                if busy:
                    printer.end_line()
                    agent.steer(text)
                    printer.note(f"(steering) {text}")
                else:
                    busy = True
                    agent.send(text)
                    if not interactive:
                        await agent.wait_idle()  # piped input: one turn per line
            await agent.wait_idle()
            nursery.cancel_scope.cancel()
        session_id = agent.session.id
        if handle is not None:
            await handle.aclose()
        if config.persistence.type not in ("none", "memory"):
            err.write(f"resume with: trio-agent chat --resume {session_id}\n")
    if terminated:
        err.write(f"trio-agent: stopped by {signal.Signals(terminated[0]).name}\n")
        return 128 + terminated[0]
    return 0


class _LineReader:
    """Lines from a file descriptor, each ``os.read`` in a worker thread trio may abandon.

    Not ``sys.stdin.readline``: an abandoned thread blocked in it holds the buffered reader's
    lock, and the interpreter then hangs at exit closing stdin (Ctrl-C at an idle prompt must
    exit at once). ``os.read`` holds no Python-level lock.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False

    async def readline(self) -> str:
        """The next line with its newline, or what is left at end of input ("" when none)."""
        while b"\n" not in self.buffer and not self.eof:
            chunk = await trio.to_thread.run_sync(os.read, self.fd, 65536, abandon_on_cancel=True)
            if chunk:
                self.buffer += chunk
            else:
                self.eof = True
        line, newline, rest = self.buffer.partition(b"\n")
        self.buffer = rest
        return (line + newline).decode("utf-8", errors="replace")


#: Shown on a terminal when the agent is idle and waits for the next line.
_IDLE_PROMPT = "> "


_CHAT_HELP = """\
commands:
  /help      this list
  /cancel    cancel the running turn (Ctrl-C does the same)
  /exit      quit (also /quit, Ctrl-D)
a line typed while a turn runs steers it; //text sends a line starting with /"""
